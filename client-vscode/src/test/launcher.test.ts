import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import * as path from 'path';

import { judgeVersion, serverExecutable } from '../launcher';

test('the server runs launch.py from the extension, with the environment untouched', () => {
  const env = { PATH: '/usr/bin', HOME: '/home/ada' };
  const executable = serverExecutable('/venv/bin/python', '/ext', '/work/project', env);
  assert.equal(executable.command, '/venv/bin/python');
  assert.deepEqual(executable.args, ['-u', path.join('/ext', 'client-vscode', 'bundled', 'launch.py')]);
  assert.deepEqual(executable.options.env, env);  // no PYTHONPATH: it would leak into verification
  assert.equal(executable.options.cwd, '/work/project');
});

test('interpreter versions', () => {
  assert.deepEqual(judgeVersion('3.11.7\n'), { ok: true, version: '3.11.7' });
  assert.equal(judgeVersion('3.9.18').ok, false);
  assert.match(judgeVersion('3.9.18').problem ?? '', /needs 3\.10/);
  assert.equal(judgeVersion('Python was not found').ok, false);
});
