import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { EXECUTE_COMMAND_METHOD, leavingOut } from '../serverCommands';
import {
  classAt, initialKwargs, inputArguments, inputProblem, kwargsProblem, rememberedInputs, rememberedKey, serverArguments,
  summaryOf, verifyArguments, verifyLogLine,
} from '../verifyRequest';

test('verify arguments from a code lens, a Uri, a string, or the active editor', () => {
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', className: 'Block', device: '' }], undefined),
    { uri: 'file:///m.py', className: 'Block' });
  assert.deepEqual(verifyArguments([{ scheme: 'file', toString: () => 'file:///a.py' }], 'file:///b.py'),
    { uri: 'file:///a.py' });
  assert.deepEqual(verifyArguments(['file:///a.py'], undefined), { uri: 'file:///a.py' });
  assert.deepEqual(verifyArguments([], 'file:///b.py'), { uri: 'file:///b.py' });
  assert.equal(verifyArguments([], undefined), undefined);
});

const FILE = [
  'import torch.nn as nn',            // 0
  '',
  'class Block(nn.Module):',          // 2
  '    def __init__(self):',
  '        super().__init__()',
  '',
  '    # a comment at the class\'s own depth',
  '    def forward(self, x):',
  '        return x',                   // 8
  '# a comment at column 0 stays inside',
  '',
  'def helper():',                   // 11
  '    class Inner(nn.Module):',      // 12
  '        pass',
  '    return Inner',                 // 14
  'class Wide(',                     // 15
  '    nn.Module,',
  '):',
  '    pass',                         // 18
];
const CLASSES = [{ name: 'Block', line: 2 }, { name: 'Inner', line: 12 }, { name: 'Wide', line: 15 }];

test('the class under the cursor', () => {
  assert.equal(classAt(FILE, CLASSES, 0), undefined);
  assert.equal(classAt(FILE, CLASSES, 2), 'Block');
  assert.equal(classAt(FILE, CLASSES, 8), 'Block');
  assert.equal(classAt(FILE, CLASSES, 10), 'Block');  // trailing blank and comment lines
  assert.equal(classAt(FILE, CLASSES, 11), undefined);
  assert.equal(classAt(FILE, CLASSES, 13), 'Inner');
  assert.equal(classAt(FILE, CLASSES, 14), undefined);
  assert.equal(classAt(FILE, CLASSES, 18), 'Wide');  // past the `):` of a multi-line header
  assert.equal(classAt(FILE, [], 8), undefined);
});

test('a summary line from whatever the server answers', () => {
  assert.equal(summaryOf('2 problems confirmed\nmore'), '2 problems confirmed');
  assert.equal(summaryOf({ summary: 'ran on cuda' }), 'ran on cuda');
  assert.equal(summaryOf({ error: 'no torch in /usr/bin/python3' }), 'verification failed: no torch in /usr/bin/python3');
  assert.match(summaryOf(null), /verification finished/);
  assert.equal(summaryOf({ device: 'cpu', issues_total: 4, classes: [{ name: 'LayerScaleBlock', status: 'verified' }] }),
    '4 problems (in the Problems panel) in LayerScaleBlock on cpu');
  assert.equal(summaryOf({ device: 'cuda', issues_total: 0, classes: [
    { name: 'A', status: 'verified' }, { name: 'B', status: 'skipped', skip_reason: 'needs arguments (dim)' }] }),
  'no problems in A on cuda; B skipped: needs arguments (dim)');
  assert.equal(summaryOf({ device: 'cpu', issues_total: 0, classes: [
    { name: 'B', status: 'skipped', skip_reason: 'needs arguments (dim)' }] }),
  'nothing verified on cpu; B skipped: needs arguments (dim)');
});

// A stand-in for vscode-languageclient's ExecuteCommandFeature: records what it registers.
class FakeExecuteCommandFeature {
  registered: string[][] = [];
  get registrationType() {
    return { method: EXECUTE_COMMAND_METHOD };
  }
  initialize(capabilities: { executeCommandProvider?: { commands: string[] } }): void {
    if (capabilities.executeCommandProvider) {
      this.register({ id: 'static', registerOptions: capabilities.executeCommandProvider });
    }
  }
  register(data: { id: string; registerOptions: { commands: string[] } }): void {
    this.registered.push(data.registerOptions.commands);
  }
}

test('the language client leaves the extension\'s own commands alone', () => {
  const feature = new FakeExecuteCommandFeature();
  const wrapped = leavingOut(feature, ['torchlint.verifyModule']);
  assert.equal(wrapped.registrationType.method, EXECUTE_COMMAND_METHOD);
  const capabilities = { executeCommandProvider: { commands: ['torchlint.verifyModule', 'torchlint.other'] } };
  wrapped.initialize(capabilities);
  wrapped.register({ id: 'dynamic', registerOptions: { commands: ['torchlint.verifyModule'] } });
  assert.deepEqual(feature.registered, [['torchlint.other'], []]);
  assert.deepEqual(capabilities.executeCommandProvider.commands, ['torchlint.verifyModule', 'torchlint.other']);
  wrapped.initialize({});  // a server without commands
  assert.equal(feature.registered.length, 2);

  const other = { registrationType: { method: 'textDocument/codeLens' } };
  assert.equal(leavingOut(other, ['torchlint.verifyModule']), other);
});

test('a lens for a class that needs arguments, and what reaches the server', () => {
  const request = verifyArguments([{ uri: 'file:///m.py', className: 'Net', needsArguments: ['dim', 'depth'] }], undefined);
  assert.deepEqual(request, { uri: 'file:///m.py', className: 'Net', needsArguments: ['dim', 'depth'] });
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', needsArguments: [3] }], undefined), { uri: 'file:///m.py' });
  assert.deepEqual(serverArguments({ ...request!, initKwargs: 'dim=4, depth=2' }),
    { uri: 'file:///m.py', className: 'Net', initKwargs: 'dim=4, depth=2' });
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', initKwargs: 'dim=1' }], undefined),
    { uri: 'file:///m.py', initKwargs: 'dim=1' });
});

test('the arguments box: remembered text first, else a template; its shape checked', () => {
  assert.equal(rememberedKey('file:///m.py', 'Net'), 'file:///m.py::Net');
  assert.equal(initialKwargs(undefined, ['dim', 'depth']), 'dim=, depth=');
  assert.equal(initialKwargs('dim=64, depth=2', ['dim', 'depth']), 'dim=64, depth=2');
  assert.equal(kwargsProblem('dim=64, depth=2', ['dim', 'depth']), undefined);
  assert.equal(kwargsProblem("sizes=(1, 2), name='a,b', cfg={'x': [1, 2]}, dim=3", ['dim']), undefined);
  assert.equal(kwargsProblem('dim=64', ['dim', 'depth']), 'depth is still needed');
  assert.equal(kwargsProblem('dim=, depth=2', ['dim', 'depth']), 'give a value for dim');
  assert.match(kwargsProblem('64, 2', ['dim']) ?? '', /is not name=value/);
  assert.match(kwargsProblem('dim == 3') ?? '', /is not name=value/);
  assert.match(kwargsProblem('', ['dim']) ?? '', /give dim/);
  assert.equal(kwargsProblem(''), undefined);
});

test('a lens for a class that needs inputs, and what reaches the server', () => {
  const request = verifyArguments([{ uri: 'file:///m.py', className: 'Picky', needsInputs: ['x', 'mask'] }], undefined);
  assert.deepEqual(request, { uri: 'file:///m.py', className: 'Picky', needsInputs: ['x', 'mask'] });
  assert.deepEqual(serverArguments({ ...request!, inputShapes: ['2,37', '2,37'] }),
    { uri: 'file:///m.py', className: 'Picky', inputShapes: ['2,37', '2,37'] });
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', inputs: ['torch.randn(2)'], inputShapes: [] }], undefined),
    { uri: 'file:///m.py', inputs: ['torch.randn(2)'] });
  assert.deepEqual(verifyArguments([{ uri: 'file:///m.py', needsInputs: 'x', inputShapes: [2] }], undefined),
    { uri: 'file:///m.py' });
});

test('an input box takes a shape of positive whole numbers or a Python expression', () => {
  for (const good of ['2, 3, 224, 224', '2,16', ' (2, 16) ', '[4]', '16', 'torch.randint(0, 100, (2, 16))',
                      "torch.tensor([1, 2], dtype=torch.long)", 'True', "make('a)b')"]) {
    assert.equal(inputProblem(good), undefined, good);
  }
  assert.match(inputProblem('') ?? '', /give a shape/);
  for (const badShape of ['2, 0', '2, -3', '2.5, 3', '2,,3', '2 3']) {
    assert.match(inputProblem(badShape) ?? '', /positive whole numbers/, badShape);
  }
  assert.match(inputProblem('torch.randn(2, 16') ?? '', /brackets or quotes/);
  assert.match(inputProblem("torch.ones(2)) + (1") ?? '', /brackets or quotes/);
  assert.match(inputProblem("f('a)") ?? '', /brackets or quotes/);
});

test('shapes go as inputShapes; a mix goes as expressions', () => {
  assert.deepEqual(inputArguments(['2, 3, 224, 224', '(2, 16)']), { inputShapes: ['2,3,224,224', '2,16'] });
  assert.deepEqual(inputArguments(['2, 16', ' torch.ones(2, 16, dtype=torch.bool) ']),
    { inputs: ['torch.randn(2, 16)', 'torch.ones(2, 16, dtype=torch.bool)'] });
});

test('remembered inputs are reused when they still fit what the lens asks', () => {
  const key = rememberedKey('file:///m.py', 'Picky');
  const remembered: Record<string, unknown> = { [key]: ['2, 37'], 'file:///m.py::Bad': ['2, 0'], 'file:///m.py::Odd': 3 };
  assert.deepEqual(rememberedInputs(remembered, key, ['x']), ['2, 37']);
  assert.deepEqual(rememberedInputs(remembered, key, undefined), ['2, 37']);  // the lens no longer asks: still used
  assert.equal(rememberedInputs(remembered, key, ['x', 'mask']), undefined);  // forward changed: ask again
  assert.equal(rememberedInputs(remembered, 'file:///m.py::Other', ['x']), undefined);
  assert.equal(rememberedInputs(remembered, 'file:///m.py::Bad', ['x']), undefined);
  assert.equal(rememberedInputs(remembered, 'file:///m.py::Odd', ['x']), undefined);
});

test('the summary names a partly verified class and why', () => {
  const summary = summaryOf({ issues_total: 0, device: 'cpu', classes: [
    { name: 'Picky', status: 'partly verified', partial_reason: 'gradients skipped: no example inputs' }] });
  assert.equal(summary, 'no problems in Picky on cpu; Picky partly verified: gradients skipped: no example inputs');
});

test('one readable line per verify run in the output channel, never the raw report', () => {
  const report = {
    outcome: 'completed', error: null, device: 'cpu', duration_s: 14.37422962300002, issues_total: 2, file_issues: [],
    classes: [{ name: 'Net', status: 'verified', issues: [{ code: 'TL901', message: 'a' }, { code: 'TL903', message: 'b' }] }],
  };
  assert.equal(verifyLogLine('file:///w/model.py', 'Net', report), 'verify model.py::Net: 2 findings (TL901, TL903) in 14.4 s on cpu');
  assert.equal(verifyLogLine('file:///w/my%20model.py', undefined, { ...report, issues_total: 0, classes: [
    { name: 'Net', status: 'verified', issues: [] }, { name: 'Big', status: 'skipped', skip_reason: 'needs dim' }] }),
  'verify my model.py: no findings in 14.4 s on cpu; Big skipped: needs dim');
  assert.equal(verifyLogLine('file:///w/model.py', 'Net', { outcome: 'error', error: 'the probe did not run', duration_s: 0.25 }),
    'verify model.py::Net: failed: the probe did not run in 0.3 s');
  assert.equal(verifyLogLine('file:///w/model.py', 'Net', { error: 'no class Net' }), 'verify model.py::Net: failed: no class Net');
  assert.equal(verifyLogLine('file:///w/model.py', undefined, null), 'verify model.py: no report');
});
