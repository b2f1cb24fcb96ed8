import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { reactionTo, serverSettings } from '../settings';

const trusted = { trusted: true, interpreter: '/venv/bin/python', interpreterSource: 'the Python extension\'s active environment' };

/** The extension's settings as package.json declares them (out/test/ -> the repository root). */
const PROPERTIES: Record<string, { type: string | string[]; default?: unknown; enum?: unknown[] }> =
  JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8'))
    .contributes.configuration.properties;

/** A section as vscode.workspace.getConfiguration gives it: values nested at the dots, and methods. */
function section(values: Record<string, unknown>): Record<string, unknown> {
  const nested: Record<string, unknown> = { get: () => undefined, has: () => false };
  for (const [key, value] of Object.entries(values)) {
    const parts = key.split('.');
    let table = nested;
    for (const part of parts.slice(0, -1)) {
      table = (table[part] ??= {}) as Record<string, unknown>;
    }
    table[parts[parts.length - 1]] = value;
  }
  return nested;
}

function valueAt(settings: Record<string, unknown>, key: string): unknown {
  return key.split('.').reduce<unknown>((table, part) => (table as Record<string, unknown> | undefined)?.[part], settings);
}

/** A value of the declared type other than the default. */
function otherValue(declared: { type: string | string[]; default?: unknown; enum?: unknown[] }): unknown {
  if (declared.enum !== undefined) {
    return declared.enum.find((value) => value !== declared.default);
  }
  const type = Array.isArray(declared.type) ? declared.type[0] : declared.type;
  return { boolean: !declared.default, number: 7, integer: 5, string: 'x', array: ['TL101'], object: { TL101: 'hint' } }[type];
}

test('every setting package.json declares reaches the server as the editor gives it', () => {
  const keys = Object.keys(PROPERTIES).map((name) => name.replace(/^torchlint\./, ''));
  assert.ok(keys.length > 5);
  const values = Object.fromEntries(keys.map((key) => [key, otherValue(PROPERTIES[`torchlint.${key}`])]));
  const settings = serverSettings(section(values), trusted);
  for (const key of keys) {
    if (key === 'interpreter') {
      continue;  // the server gets the interpreter it runs on (next test)
    }
    assert.deepEqual(valueAt(settings, key), values[key], `torchlint.${key} is not sent as given`);
  }
});

test('the server gets the interpreter it runs on, where it came from, and none of VS Code\'s methods', () => {
  const settings = serverSettings(section({ interpreter: '', select: null }), trusted);
  assert.deepEqual(settings, { interpreter: '/venv/bin/python', interpreterSource: 'the Python extension\'s active environment',
                               select: null });
});

test('values of the wrong type are sent as they are, for the server to report', () => {
  const settings = serverSettings(section({ select: 'TL101', 'verify.timeout': -1 }), trusted);
  assert.equal(settings.select, 'TL101');
  assert.deepEqual(settings.verify, { timeout: -1 });
});

test('the workspace interpreter trust is never sent: a workspace could give it to itself', () => {
  assert.equal('trustWorkspaceInterpreter' in serverSettings(section({ trustWorkspaceInterpreter: true }), trusted), false);
});

test('no verify lens in an untrusted workspace, whatever the setting', () => {
  const untrusted = { trusted: false, interpreter: 'python3', interpreterSource: 'the default' };
  assert.equal(serverSettings(section({ codeLens: true }), untrusted).codeLens, false);
  assert.equal(serverSettings(section({ codeLens: true }), trusted).codeLens, true);
});

function change(...sections: string[]) {
  return { affectsConfiguration: (section: string) => sections.some((s) => s === section || s.startsWith(section + '.')) };
}

test('interpreter and enable restart the server; the other settings are sent to it', () => {
  assert.equal(reactionTo(change('torchlint.interpreter')), 'restart');
  assert.equal(reactionTo(change('torchlint.enable')), 'restart');
  assert.equal(reactionTo(change('torchlint.importStrategy')), 'restart');
  assert.equal(reactionTo(change('torchlint.inlayHints')), 'notify');
  assert.equal(reactionTo(change('torchlint.select')), 'notify');
  assert.equal(reactionTo(change('torchlint.verify.timeout')), 'notify');
  assert.equal(reactionTo(change('torchlint.inferBudget')), 'notify');
  assert.equal(reactionTo(change('torchlint.someFutureSetting')), 'notify');
  assert.equal(reactionTo(change('editor.fontSize')), 'none');
});
