import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { reactionTo, serverSettings } from '../settings';

function config(values: Record<string, unknown>) {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

const trusted = { trusted: true, interpreter: '/venv/bin/python' };

test('defaults when nothing is set', () => {
  assert.deepEqual(serverSettings(config({}), trusted), {
    select: null, ignore: [], severity: {}, codeLens: true,
    verify: { device: 'auto', timeout: 120 }, interpreter: '/venv/bin/python',
  });
});

test('the settings map onto the server\'s keys', () => {
  const settings = serverSettings(config({
    'select': ['TL1', 'TL301'], 'ignore': ['TL102'], 'severity': { TL301: 'hint' }, 'codeLens': false,
    'verify.device': 'cpu', 'verify.timeout': 30,
  }), trusted);
  assert.deepEqual(settings, {
    select: ['TL1', 'TL301'], ignore: ['TL102'], severity: { TL301: 'hint' }, codeLens: false,
    verify: { device: 'cpu', timeout: 30 }, interpreter: '/venv/bin/python',
  });
});

test('values of the wrong type fall back to the defaults', () => {
  const settings = serverSettings(config({
    'select': 'TL101', 'ignore': [1, 2], 'severity': ['x'], 'codeLens': 'yes',
    'verify.device': 7, 'verify.timeout': -1,
  }), trusted);
  assert.equal(settings.select, null);
  assert.deepEqual(settings.ignore, []);
  assert.deepEqual(settings.severity, {});
  assert.equal(settings.codeLens, true);
  assert.deepEqual(settings.verify, { device: 'auto', timeout: 120 });
});

test('inlay hints are sent when set, else left to the server', () => {
  assert.equal(serverSettings(config({ inlayHints: true }), trusted).inlayHints, true);
  assert.equal('inlayHints' in serverSettings(config({ inlayHints: 'yes' }), trusted), false);
});

test('the inference cache and budget are sent when set, else left to the server', () => {
  const settings = serverSettings(config({ inferenceCache: false, inferBudget: 0 }), trusted);
  assert.equal(settings.inferenceCache, false);
  assert.equal(settings.inferBudget, 0);
  const wrong = serverSettings(config({ inferenceCache: 'no', inferBudget: -1 }), trusted);
  assert.equal('inferenceCache' in wrong || 'inferBudget' in wrong, false);
  assert.equal(reactionTo(change('torchlint.inferBudget')), 'notify');
});

test('no verify lens in an untrusted workspace, whatever the setting', () => {
  assert.equal(serverSettings(config({ codeLens: true }), { trusted: false, interpreter: 'python3' }).codeLens, false);
});

function change(...sections: string[]) {
  return { affectsConfiguration: (section: string) => sections.some((s) => s === section || s.startsWith(section + '.')) };
}

test('interpreter and enable restart the server; rule settings are sent to it', () => {
  assert.equal(reactionTo(change('torchlint.interpreter')), 'restart');
  assert.equal(reactionTo(change('torchlint.enable')), 'restart');
  assert.equal(reactionTo(change('torchlint.importStrategy')), 'restart');
  assert.equal(reactionTo(change('torchlint.inlayHints')), 'notify');
  assert.equal(reactionTo(change('torchlint.select')), 'notify');
  assert.equal(reactionTo(change('torchlint.verify.timeout')), 'notify');
  assert.equal(reactionTo(change('torchlint.trace.server')), 'none');
  assert.equal(reactionTo(change('editor.fontSize')), 'none');
});
