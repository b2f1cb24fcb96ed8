// Which Python runs the torchlint server: the `torchlint.interpreter` setting, else the
// Python extension's active environment (when that extension is installed), else python3.
// Only types come from `vscode`, so the unit tests run under plain node with fakes.
import type * as vscode from 'vscode';
import * as path from 'path';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  /** An absolute path, or a command name looked up on PATH. */
  command: string;
  source: InterpreterSource;
}

export const PYTHON_EXTENSION_ID = 'ms-python.python';

const SOURCE_NAMES: Record<InterpreterSource, string> = {
  'setting': 'the torchlint.interpreter setting',
  'python-extension': 'the Python extension\'s active environment',
  'default': 'the default',
};

/** Where an interpreter came from, in the words every message uses: the status bar, the output
 *  channel and the server's own log (it gets them as the `interpreterSource` setting). */
export function sourceDescription(source: InterpreterSource): string {
  return SOURCE_NAMES[source];
}

/** The interpreter as every message names it: `python3, from the default`. */
export function describeInterpreter(interpreter: Interpreter): string {
  return `${interpreter.command}, from ${sourceDescription(interpreter.source)}`;
}

export function defaultInterpreter(platform: string = process.platform): string {
  // On Windows `python3` is often the Microsoft Store stub; `python` is the real one.
  return platform === 'win32' ? 'python' : 'python3';
}

export interface ExpandContext {
  workspaceFolder?: string;
  home: string;
  env: Record<string, string | undefined>;
}

/** The setting's value with `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}`
 *  expanded; a relative path (one with a separator) is taken from the workspace folder.
 *  A bare name (`python3.12`) stays a name for PATH lookup. */
export function expandSetting(value: string, context: ExpandContext): string {
  let expanded = value.trim()
    .replace(/\$\{userHome\}/g, context.home)
    .replace(/\$\{env:([^}]+)\}/g, (_whole, name: string) => context.env[name] ?? '');
  if (context.workspaceFolder !== undefined) {
    expanded = expanded.replace(/\$\{workspaceFolder\}/g, context.workspaceFolder);
  }
  if (expanded === '~' || expanded.startsWith('~/') || expanded.startsWith('~\\')) {
    expanded = path.join(context.home, expanded.slice(1));
  }
  const hasSeparator = expanded.includes('/') || expanded.includes('\\');
  if (hasSeparator && !path.isAbsolute(expanded) && context.workspaceFolder !== undefined) {
    expanded = path.join(context.workspaceFolder, expanded);
  }
  return expanded;
}

/** The first of: the setting, the Python extension's environment, the default. */
export function chooseInterpreter(setting: string | undefined, fromPythonExtension: string | undefined,
                                  context: ExpandContext, platform: string = process.platform): Interpreter {
  if (setting !== undefined && setting.trim() !== '') {
    return { command: expandSetting(setting, context), source: 'setting' };
  }
  if (fromPythonExtension !== undefined && fromPythonExtension !== '') {
    return { command: fromPythonExtension, source: 'python-extension' };
  }
  return { command: defaultInterpreter(platform), source: 'default' };
}

// The slice of the Python extension's API used here (its `environments` API, with the older
// `settings.getExecutionDetails` as a fallback for old releases of the extension).
interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
  resolveEnvironment(environment: { path: string } | string):
    Promise<{ executable?: { uri?: { fsPath: string } } } | undefined>;
  onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
}

interface PythonExtensionApi {
  environments?: PythonEnvironmentsApi;
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } | undefined;
    onDidChangeExecutionDetails?: vscode.Event<unknown>;
  };
}

/** The part of `vscode.extensions` this module needs. */
export interface ExtensionsLike {
  getExtension(id: string): vscode.Extension<unknown> | undefined;
}

const ACTIVATION_TIMEOUT_MS = 15000;

function withTimeout<T>(promise: Thenable<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    promise.then((value) => { clearTimeout(timer); resolve(value); },
                 (error) => { clearTimeout(timer); reject(error); });
  });
}

async function pythonExtensionApi(extensions: ExtensionsLike): Promise<PythonExtensionApi | undefined> {
  const extension = extensions.getExtension(PYTHON_EXTENSION_ID);
  if (extension === undefined) {
    return undefined;
  }
  const api = extension.isActive ? extension.exports : await withTimeout(extension.activate(), ACTIVATION_TIMEOUT_MS);
  return (api ?? undefined) as PythonExtensionApi | undefined;
}

/** The executable of the Python extension's active environment for `resource`, or
 *  undefined when that extension is missing, slow to start, or has no environment. */
export async function pythonExtensionInterpreter(extensions: ExtensionsLike, resource?: vscode.Uri,
                                                 log?: (message: string) => void): Promise<string | undefined> {
  try {
    const api = await pythonExtensionApi(extensions);
    if (api === undefined) {
      return undefined;
    }
    const environments = api.environments;
    if (environments !== undefined) {
      const active = environments.getActiveEnvironmentPath(resource);
      if (active !== undefined) {
        const resolved = await environments.resolveEnvironment(active);
        const executable = resolved?.executable?.uri?.fsPath;
        if (executable) {
          return executable;
        }
      }
    }
    const command = api.settings?.getExecutionDetails?.(resource)?.execCommand;
    // A command such as ['conda', 'run', ...] is not one interpreter path: use it only bare.
    return command !== undefined && command.length === 1 ? command[0] : undefined;
  } catch (error) {
    log?.(`The Python extension could not tell its environment: ${String(error)}`);
    return undefined;
  }
}

/** Subscribes to the Python extension's environment changes (after it is activated). */
export async function onPythonEnvironmentChange(extensions: ExtensionsLike, listener: () => void):
    Promise<vscode.Disposable | undefined> {
  try {
    const api = await pythonExtensionApi(extensions);
    const event = api?.environments?.onDidChangeActiveEnvironmentPath ?? api?.settings?.onDidChangeExecutionDetails;
    return event?.(() => listener());
  } catch {
    return undefined;
  }
}
