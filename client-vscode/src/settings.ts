// The `torchlint.*` settings as the language server gets them. Pure: no `vscode` import, so
// the unit tests run under plain node.

export const SECTION = 'torchlint';

/** The `torchlint` section as vscode.workspace.getConfiguration(SECTION) gives it: each
 *  setting's value (an unset one at its package.json default), nested objects at the dots
 *  (`verify.device` is `verify: { device }`). */
export type Section = Readonly<Record<string, unknown>>;

/** What the server gets in initializationOptions, workspace/configuration and
 *  didChangeConfiguration: the whole section. Each setting is declared once, in the server's
 *  torchlint/settings.py, which reads and validates it (and logs what it rejects); package.json
 *  is checked against that declaration. A new setting needs nothing here. */
export type ServerSettings = Record<string, unknown>;

export interface Environment {
  /** vscode.workspace.isTrusted */
  trusted: boolean;
  /** The interpreter the server was started with (verification runs the same one). */
  interpreter: string;
  /** Where it came from, as the extension's messages say it (interpreter.ts's sourceDescription):
   *  the server's log names it the same way. */
  interpreterSource: string;
}

/** A user's trust in the workspace's interpreter. package.json does not offer it, so VS Code
 *  cannot keep a workspace's own settings from giving it: never forwarded. */
const NOT_FORWARDED = ['trustWorkspaceInterpreter'];

/** The server's settings: the editor's section (a copy of its values, without VS Code's
 *  methods), with what only the extension knows put over it. */
export function serverSettings(section: Section, env: Environment): ServerSettings {
  const settings: ServerSettings = JSON.parse(JSON.stringify(section));
  for (const key of NOT_FORWARDED) {
    delete settings[key];
  }
  settings.interpreter = env.interpreter;
  settings.interpreterSource = env.interpreterSource;
  if (!env.trusted) {
    // The lens runs the verification, which executes workspace code: never offer it untrusted.
    settings.codeLens = false;
  }
  return settings;
}

/** The part of vscode.ConfigurationChangeEvent this module needs. */
export interface ChangeLike {
  affectsConfiguration(section: string): boolean;
}

/** What a settings change asks of the extension: start the server again (it runs with
 *  another interpreter, or is switched on or off), send it the new settings, or nothing.
 *  Every other change of the section is sent: the server ignores what it does not read. */
export function reactionTo(change: ChangeLike): 'restart' | 'notify' | 'none' {
  const restarted = ['enable', 'interpreter', 'importStrategy'];
  if (restarted.some((key) => change.affectsConfiguration(`${SECTION}.${key}`))) {
    return 'restart';
  }
  return change.affectsConfiguration(SECTION) ? 'notify' : 'none';
}
