import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import * as path from 'path';

import { IMPORT_STRATEGIES, importStrategy, judgeVersion, serverExecutable } from '../launcher';

test('the server runs launch.py from the extension, with the environment untouched', () => {
  const env = { PATH: '/usr/bin', HOME: '/home/ada' };
  const executable = serverExecutable('/venv/bin/python', '/ext', '/work/project', env);
  assert.equal(executable.command, '/venv/bin/python');
  assert.deepEqual(executable.args, ['-u', path.join('/ext', 'client-vscode', 'bundled', 'launch.py')]);
  assert.deepEqual(executable.options.env, env);  // no PYTHONPATH: it would leak into verification
  assert.equal(executable.options.cwd, '/work/project');
});

test('importStrategy fromEnvironment asks launch.py for the installed torchlint', () => {
  const script = path.join('/ext', 'client-vscode', 'bundled', 'launch.py');
  for (const strategy of IMPORT_STRATEGIES) {
    assert.equal(importStrategy(strategy), strategy);
  }
  assert.equal(importStrategy('somethingElse'), 'useBundled');
  assert.deepEqual(serverExecutable('python3', '/ext', undefined, {}, 'useBundled').args, ['-u', script]);
  assert.deepEqual(serverExecutable('python3', '/ext', undefined, {}, 'fromEnvironment').args,
    ['-u', script, '--from-environment']);
});

test('interpreter versions', () => {
  assert.deepEqual(judgeVersion('3.11.7\n'), { ok: true, version: '3.11.7' });
  assert.equal(judgeVersion('3.9.18').ok, false);
  assert.match(judgeVersion('3.9.18').problem ?? '', /needs 3\.10/);
  assert.equal(judgeVersion('Python was not found').ok, false);
});
