import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import * as path from 'path';

import {
  chooseInterpreter, describeInterpreter, expandSetting, pythonExtensionInterpreter, sourceDescription,
} from '../interpreter';

const context = { workspaceFolder: '/work/project', home: '/home/ada', env: { CONDA_PREFIX: '/opt/conda' } };

test('the setting wins over the Python extension and the default', () => {
  assert.deepEqual(chooseInterpreter('/usr/bin/python3.12', '/venv/bin/python', context),
    { command: '/usr/bin/python3.12', source: 'setting' });
});

test('an empty or blank setting falls through to the Python extension', () => {
  for (const setting of [undefined, '', '   ']) {
    assert.deepEqual(chooseInterpreter(setting, '/venv/bin/python', context),
      { command: '/venv/bin/python', source: 'python-extension' });
  }
});

test('without either, python3 (python on Windows)', () => {
  assert.deepEqual(chooseInterpreter('', undefined, context, 'linux'), { command: 'python3', source: 'default' });
  assert.deepEqual(chooseInterpreter(undefined, '', context, 'win32'), { command: 'python', source: 'default' });
});

test('the setting expands variables, ~ and workspace-relative paths', () => {
  assert.equal(expandSetting('${workspaceFolder}/.venv/bin/python', context), '/work/project/.venv/bin/python');
  assert.equal(expandSetting('~/envs/torch/bin/python', context), path.join('/home/ada', 'envs/torch/bin/python'));
  assert.equal(expandSetting('${userHome}/bin/python', context), '/home/ada/bin/python');
  assert.equal(expandSetting('${env:CONDA_PREFIX}/bin/python', context), '/opt/conda/bin/python');
  assert.equal(expandSetting('.venv/bin/python', context), path.join('/work/project', '.venv/bin/python'));
  assert.equal(expandSetting('python3.12', context), 'python3.12');  // a name stays a name for PATH
});

function fakeExtensions(exports: unknown, active = true) {
  const extension = { isActive: active, exports, activate: async () => exports };
  return { getExtension: (id: string) => (id === 'ms-python.python' ? extension : undefined) as never };
}

test('no Python extension: undefined', async () => {
  assert.equal(await pythonExtensionInterpreter({ getExtension: () => undefined }), undefined);
});

test('the Python extension\'s active environment, through its environments API', async () => {
  const api = {
    environments: {
      getActiveEnvironmentPath: () => ({ path: '/venv' }),
      resolveEnvironment: async (env: { path: string }) =>
        ({ executable: { uri: { fsPath: `${env.path}/bin/python` } } }),
    },
  };
  assert.equal(await pythonExtensionInterpreter(fakeExtensions(api, false)), '/venv/bin/python');
});

test('older Python extensions: execution details, but only a bare interpreter', async () => {
  const bare = { settings: { getExecutionDetails: () => ({ execCommand: ['/usr/bin/python3.10'] }) } };
  assert.equal(await pythonExtensionInterpreter(fakeExtensions(bare)), '/usr/bin/python3.10');
  const conda = { settings: { getExecutionDetails: () => ({ execCommand: ['conda', 'run', '-n', 'x', 'python'] }) } };
  assert.equal(await pythonExtensionInterpreter(fakeExtensions(conda)), undefined);
});

test('a failing Python extension is logged and ignored', async () => {
  const broken = { environments: { getActiveEnvironmentPath: () => { throw new Error('not ready'); } } };
  const logged: string[] = [];
  assert.equal(await pythonExtensionInterpreter(fakeExtensions(broken), undefined, (m) => logged.push(m)), undefined);
  assert.match(logged[0], /not ready/);
});

test('an interpreter is named one way: the status bar, the output channel and the server\'s log', () => {
  assert.equal(describeInterpreter(chooseInterpreter('', undefined, context, 'linux')), 'python3, from the default');
  assert.equal(describeInterpreter(chooseInterpreter('', '/venv/bin/python', context)),
    '/venv/bin/python, from the Python extension\'s active environment');
  assert.equal(describeInterpreter(chooseInterpreter('~/py/bin/python', undefined, context)),
    '/home/ada/py/bin/python, from the torchlint.interpreter setting');
  // What the server is told: the same words, after the command's "from".
  for (const source of ['setting', 'python-extension', 'default'] as const) {
    assert.ok(describeInterpreter({ command: 'x', source }).endsWith(`, from ${sourceDescription(source)}`));
  }
});
