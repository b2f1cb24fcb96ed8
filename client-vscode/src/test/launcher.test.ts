import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import * as path from 'path';

import { judgeVersion, serverExecutable } from '../launcher';
import { summaryOf, verifyArguments } from '../verifyRequest';

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

test('verify arguments from a code lens, a Uri, a string, or the active editor', () => {
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', className: 'Block', device: '' }], undefined),
    { uri: 'file:///m.py', className: 'Block' });
  assert.deepEqual(verifyArguments([{ scheme: 'file', toString: () => 'file:///a.py' }], 'file:///b.py'),
    { uri: 'file:///a.py' });
  assert.deepEqual(verifyArguments(['file:///a.py'], undefined), { uri: 'file:///a.py' });
  assert.deepEqual(verifyArguments([], 'file:///b.py'), { uri: 'file:///b.py' });
  assert.equal(verifyArguments([], undefined), undefined);
});

test('a summary line from whatever the server answers', () => {
  assert.equal(summaryOf('2 problems confirmed\nmore'), '2 problems confirmed');
  assert.equal(summaryOf({ summary: 'ran on cuda' }), 'ran on cuda');
  assert.match(summaryOf(null), /verification finished/);
});
