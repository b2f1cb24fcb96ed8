// The `torchlint.*` settings as the language server reads them. Pure: no `vscode` import, so
// the unit tests run under plain node.

export const SECTION = 'torchlint';

/** The part of vscode.WorkspaceConfiguration this module needs. */
export interface ConfigurationLike {
  get<T>(key: string): T | undefined;
}

/** What the server gets in initializationOptions, workspace/configuration and
 *  didChangeConfiguration: each declared once in the server's torchlint/settings.py, read by
 *  torchlint/lsp/workspace_settings.py; package.json is checked against that declaration. */
export interface ServerSettings {
  select: string[] | null;
  ignore: string[];
  severity: Record<string, string>;
  codeLens: boolean;
  verify: { device: string; timeout: number };
  interpreter: string;
  /** Characters above which a document is not analysed; absent: the server's default. */
  maxFileSize?: number;
  /** Inlay hints after `self.<name> = ...` in `__init__`; absent: the server's default (off). */
  inlayHints?: boolean;
  /** jedi's answers kept on disk; absent: the server's default (on). */
  inferenceCache?: boolean;
  /** Seconds of jedi per file (0: no limit); absent: the server's default. */
  inferBudget?: number;
}

export interface Environment {
  /** vscode.workspace.isTrusted */
  trusted: boolean;
  /** The interpreter the server was started with (verification runs the same one). */
  interpreter: string;
}

const DEFAULTS: ServerSettings = {
  select: null,
  ignore: [],
  severity: {},
  codeLens: true,
  verify: { device: 'auto', timeout: 120 },
  interpreter: '',
};

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((item) => typeof item === 'string') ? [...value] : undefined;
}

/** The server's settings from the editor's. Values of the wrong type fall back to the
 *  defaults here; the server validates the rest (rule codes, devices) and logs what it rejects. */
export function serverSettings(config: ConfigurationLike, env: Environment): ServerSettings {
  const select = config.get<unknown>('select');
  const ignore = config.get<unknown>('ignore');
  const severity = config.get<unknown>('severity');
  const codeLens = config.get<unknown>('codeLens');
  const device = config.get<unknown>('verify.device');
  const timeout = config.get<unknown>('verify.timeout');
  const maxFileSize = config.get<unknown>('maxFileSize');
  const inlayHints = config.get<unknown>('inlayHints');
  const inferenceCache = config.get<unknown>('inferenceCache');
  const inferBudget = config.get<unknown>('inferBudget');
  return {
    select: select === null || select === undefined ? DEFAULTS.select : stringList(select) ?? DEFAULTS.select,
    ignore: stringList(ignore) ?? DEFAULTS.ignore,
    severity: isStringRecord(severity) ? { ...severity } : DEFAULTS.severity,
    // The lens runs the verification, which executes workspace code: never offer it untrusted.
    codeLens: env.trusted && (typeof codeLens === 'boolean' ? codeLens : DEFAULTS.codeLens),
    verify: {
      device: typeof device === 'string' && device !== '' ? device : DEFAULTS.verify.device,
      timeout: typeof timeout === 'number' && timeout > 0 ? timeout : DEFAULTS.verify.timeout,
    },
    interpreter: env.interpreter,
    ...(typeof maxFileSize === 'number' && maxFileSize > 0 ? { maxFileSize } : {}),
    ...(typeof inlayHints === 'boolean' ? { inlayHints } : {}),
    ...(typeof inferenceCache === 'boolean' ? { inferenceCache } : {}),
    ...(typeof inferBudget === 'number' && inferBudget >= 0 ? { inferBudget } : {}),
  };
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) &&
    Object.values(value).every((item) => typeof item === 'string');
}

/** The part of vscode.ConfigurationChangeEvent this module needs. */
export interface ChangeLike {
  affectsConfiguration(section: string): boolean;
}

/** What a settings change asks of the extension: start the server again (it runs with
 *  another interpreter, or is switched on or off), send it the new settings, or nothing. */
export function reactionTo(change: ChangeLike): 'restart' | 'notify' | 'none' {
  const restarted = ['enable', 'interpreter', 'importStrategy'];
  if (restarted.some((key) => change.affectsConfiguration(`${SECTION}.${key}`))) {
    return 'restart';
  }
  // trace.server is read by the language client itself.
  const notified = ['select', 'ignore', 'severity', 'codeLens', 'verify', 'maxFileSize', 'inlayHints',
    'inferenceCache', 'inferBudget'];
  return notified.some((key) => change.affectsConfiguration(`${SECTION}.${key}`)) ? 'notify' : 'none';
}
