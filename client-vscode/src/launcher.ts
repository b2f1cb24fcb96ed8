// How the server process is started: `<python> <extension>/client-vscode/bundled/launch.py`.
// With torchlint.importStrategy `useBundled` launch.py puts the bundled libraries (torchlint,
// pygls, jedi, ...) first on sys.path inside the server process only; with `fromEnvironment`
// it serves the torchlint installed in the interpreter's environment. Never PYTHONPATH: the
// runtime verification starts the same interpreter on the user's code, and an inherited
// PYTHONPATH would hand it our libraries.
import { execFile } from 'child_process';
import * as path from 'path';

export const MINIMUM_PYTHON: [number, number] = [3, 10];  // as bundled/launch.py

/** torchlint.importStrategy's values (package.json; declared in the server's torchlint/settings.py). */
export type ImportStrategy = 'useBundled' | 'fromEnvironment';
export const IMPORT_STRATEGIES: readonly ImportStrategy[] = ['useBundled', 'fromEnvironment'];

/** The setting's value, or `useBundled` (its default) for anything else. */
export function importStrategy(value: unknown): ImportStrategy {
  return IMPORT_STRATEGIES.find((strategy) => strategy === value) ?? 'useBundled';
}

export function launchScript(extensionPath: string): string {
  return path.join(extensionPath, 'client-vscode', 'bundled', 'launch.py');
}

export interface ServerExecutable {
  command: string;
  args: string[];
  options: { cwd?: string; env: Record<string, string | undefined> };
}

export function serverExecutable(interpreter: string, extensionPath: string, cwd: string | undefined,
                                 env: Record<string, string | undefined> = process.env,
                                 strategy: ImportStrategy = 'useBundled'): ServerExecutable {
  return {
    command: interpreter,
    // -u: unbuffered stdio, so LSP frames and log lines leave the process at once.
    args: ['-u', launchScript(extensionPath), ...(strategy === 'fromEnvironment' ? ['--from-environment'] : [])],
    options: { cwd, env: { ...env } },
  };
}

export interface Probe {
  ok: boolean;
  version?: string;
  problem?: string;
}

/** Parses the probe's output, "3.11.7" (the interpreter's version). */
export function judgeVersion(output: string): Probe {
  const match = /^(\d+)\.(\d+)\.\S+$/.exec(output.trim());
  if (match === null) {
    return { ok: false, problem: `it printed ${JSON.stringify(output.trim())} instead of its version` };
  }
  const version = output.trim();
  const [major, minor] = [Number(match[1]), Number(match[2])];
  const [needMajor, needMinor] = MINIMUM_PYTHON;
  if (major < needMajor || (major === needMajor && minor < needMinor)) {
    return { ok: false, version, problem: `it is Python ${version}; torchlint needs ${needMajor}.${needMinor} or newer` };
  }
  return { ok: true, version };
}

/** Starts the interpreter once to check it runs and is new enough: a clear message here
 *  beats a language client that dies five times in a row. */
export function probeInterpreter(command: string, timeoutMs = 20000): Promise<Probe> {
  return new Promise((resolve) => {
    execFile(command, ['-c', 'import platform; print(platform.python_version())'], { timeout: timeoutMs },
      (error, stdout) => {
        if (error) {
          resolve({ ok: false, problem: `it could not be run: ${error.message}` });
        } else {
          resolve(judgeVersion(stdout));
        }
      });
  });
}
