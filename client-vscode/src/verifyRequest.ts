// The verify command's arguments, the class it targets and its notification line, apart
// from `vscode` so the unit tests run under plain node.

export const VERIFY_COMMAND = 'torchlint.verifyModule';

export interface VerifyArguments {
  uri: string;
  className?: string;
  device?: string;
  /** Constructor arguments as Python keyword arguments of literals (`dim=64, depth=2`): the
   *  server reads them with ast.literal_eval, never evaluates them. */
  initKwargs?: string;
  /** From the server's lens: the `__init__` arguments nothing in the project supplies. Not sent. */
  needsArguments?: string[];
  /** forward's inputs as shapes, one per input (`2,3,224,224`): the command line's --input-shape. */
  inputShapes?: string[];
  /** forward's inputs as Python expressions, one per input (`torch.randn(2, 16)`): --input.
   *  The server checks their syntax; the verification's child process evaluates them. */
  inputs?: string[];
  /** From the server's lens, after a run found no inputs that fit forward: forward's inputs by
   *  name, one box each. Not sent. */
  needsInputs?: string[];
}

/** An nn.Module class of the file: its name and the 0-based line of its `class` statement. */
export interface ModuleClass {
  name: string;
  line: number;
  needsArguments?: string[];
  needsInputs?: string[];
}

// The fields a lens or a client may pass as lists of strings (each kept only when it is one).
const TEXT_LISTS = ['needsArguments', 'inputShapes', 'inputs', 'needsInputs'] as const;

function texts(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'string')
    ? value as string[] : undefined;
}

/** The request's argument from however the command was invoked: a code lens passes
 *  `{uri, className}`, an editor title or explorer menu passes a Uri, the palette nothing
 *  (then the active Python editor's file is verified). Undefined when there is no file. */
export function verifyArguments(args: unknown[], activeUri: string | undefined): VerifyArguments | undefined {
  const first = args[0];
  if (typeof first === 'object' && first !== null && typeof (first as { uri?: unknown }).uri === 'string') {
    const given = first as { uri: string; className?: unknown; device?: unknown; initKwargs?: unknown;
                             needsArguments?: unknown; inputShapes?: unknown; inputs?: unknown;
                             needsInputs?: unknown };
    const result: VerifyArguments = { uri: given.uri };
    if (typeof given.className === 'string' && given.className !== '') {
      result.className = given.className;
    }
    if (typeof given.device === 'string' && given.device !== '') {
      result.device = given.device;
    }
    if (typeof given.initKwargs === 'string') {
      result.initKwargs = given.initKwargs;
    }
    for (const key of TEXT_LISTS) {
      const listed = texts(given[key]);
      if (listed !== undefined) {
        result[key] = listed;
      }
    }
    return result;
  }
  if (typeof first === 'object' && first !== null && typeof (first as { scheme?: unknown }).scheme === 'string') {
    return { uri: String(first) };  // a vscode.Uri
  }
  if (typeof first === 'string' && first !== '') {
    return { uri: first };
  }
  return activeUri === undefined ? undefined : { uri: activeUri };
}

/** What the server is sent: the arguments without the lens's own hints. */
export function serverArguments(request: VerifyArguments): Omit<VerifyArguments, 'needsArguments' | 'needsInputs'> {
  const { needsArguments: _arguments, needsInputs: _inputs, ...sent } = request;
  return sent;
}

/** The workspaceState key under which a class's constructor arguments, and its inputs, are remembered. */
export function rememberedKey(uri: string, className: string): string {
  return `${uri}::${className}`;
}

/** What the input box shows first: the remembered text, else a template naming the arguments. */
export function initialKwargs(remembered: string | undefined, needs: readonly string[]): string {
  if (remembered !== undefined && remembered.trim() !== '') {
    return remembered;
  }
  return needs.map((name) => `${name}=`).join(', ');
}

/** Splits at the commas that are not inside brackets or quotes; `balanced`: every bracket
 *  and quote is closed, in order. */
function topLevelParts(text: string): { parts: string[]; balanced: boolean } {
  const parts: string[] = [];
  let depth = 0;
  let quote = '';
  let current = '';
  let balanced = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote !== '') {
      if (c === '\\') {
        current += c + (text[i + 1] ?? '');
        i++;
        continue;
      }
      if (c === quote) {
        quote = '';
      }
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if ('([{'.includes(c)) {
      depth++;
    } else if (')]}'.includes(c)) {
      depth--;
      balanced = balanced && depth >= 0;
    } else if (c === ',' && depth === 0) {
      parts.push(current);
      current = '';
      continue;
    }
    current += c;
  }
  parts.push(current);
  return { parts, balanced: balanced && depth === 0 && quote === '' };
}

/** Undefined when `text` looks like keyword arguments (`dim=64, depth=2`), else what is wrong.
 *  Only the shape is checked here; the server reads the values as Python literals. */
export function kwargsProblem(text: string, needs: readonly string[] = []): string | undefined {
  if (text.trim() === '') {
    return needs.length > 0 ? `give ${needs.join(', ')} as name=value, separated by commas` : undefined;
  }
  const names: string[] = [];
  for (const part of topLevelParts(text).parts) {
    if (part.trim() === '' ) {
      continue;
    }
    const match = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(\S[\s\S]*)?$/.exec(part);
    if (match === null) {
      return `"${part.trim()}" is not name=value (for example dim=64, depth=2)`;
    }
    if (match[2] === undefined) {
      return `give a value for ${match[1]}`;
    }
    names.push(match[1]);
  }
  const missing = needs.filter((name) => !names.includes(name));
  return missing.length > 0 ? `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} still needed` : undefined;
}

const SHAPE = /^\s*[([]?\s*\d+(\s*,\s*\d+)*\s*,?\s*[)\]]?\s*$/;

/** The sizes of a shape typed as `2, 3, 224, 224` (or `(2, 16)`), else undefined. */
function shapeSizes(text: string): number[] | undefined {
  return SHAPE.test(text) ? text.replace(/[()[\]\s]/g, '').split(',').filter((s) => s !== '').map(Number) : undefined;
}

/** Undefined when `text` is an input of forward as a shape (positive whole numbers separated by
 *  commas: `2, 3, 224, 224`) or as a Python expression (`torch.randn(2, 16)`), else what is
 *  wrong. An expression's brackets and quotes are checked here, its syntax by the server. */
export function inputProblem(text: string): string | undefined {
  const trimmed = text.trim();
  if (trimmed === '') {
    return 'give a shape, like 2, 3, 224, 224, or a Python expression, like torch.randn(2, 16)';
  }
  if (/^[\d\s,()[\]+.-]*$/.test(trimmed)) {  // numbers only: meant as a shape
    const sizes = shapeSizes(trimmed);
    if (sizes === undefined || sizes.some((size) => !Number.isSafeInteger(size) || size < 1)) {
      return 'a shape is positive whole numbers separated by commas, like 2, 3, 224, 224';
    }
    return undefined;
  }
  if (!topLevelParts(trimmed).balanced) {
    return `"${trimmed}" is not a Python expression: its brackets or quotes do not match`;
  }
  return undefined;
}

/** What the server is sent for forward's inputs, one text per input: all shapes go as
 *  `inputShapes` (`2,3,224,224`); otherwise every input goes as an expression (`inputs`), a
 *  shape written as `torch.randn(2, 16)`. */
export function inputArguments(values: readonly string[]): Pick<VerifyArguments, 'inputShapes' | 'inputs'> {
  const shapes = values.map((value) => shapeSizes(value.trim()));
  if (shapes.every((sizes) => sizes !== undefined)) {
    return { inputShapes: shapes.map((sizes) => sizes!.join(',')) };
  }
  return { inputs: values.map((value, i) => shapes[i] !== undefined ? `torch.randn(${shapes[i]!.join(', ')})` : value.trim()) };
}

/** The inputs remembered for a class when they still fit what its lens asks (as many as
 *  forward's inputs; any number when the lens does not say), else undefined. */
export function rememberedInputs(remembered: Record<string, unknown>, key: string,
                                 needs: readonly string[] | undefined): string[] | undefined {
  const values = texts(remembered[key]);
  if (values === undefined || values.some((value) => inputProblem(value) !== undefined)) {
    return undefined;
  }
  return needs === undefined || needs.length === values.length ? values : undefined;
}

function indentOf(line: string): number {
  return line.length - line.trimStart().length;
}

/** The innermost of `classes` whose body holds the 0-based `cursorLine` of the file's
 *  `lines`. A body ends at the first code line indented no deeper than its `class`
 *  statement (a `)` closing a multi-line class header does not end it). */
export function classAt(lines: readonly string[], classes: readonly ModuleClass[],
                        cursorLine: number): string | undefined {
  let inside: ModuleClass | undefined;
  for (const candidate of classes) {
    if (candidate.line > cursorLine || candidate.line >= lines.length) {
      continue;
    }
    const indent = indentOf(lines[candidate.line]);
    let end = lines.length;
    for (let line = candidate.line + 1; line < lines.length; line++) {
      const code = lines[line].trim();
      if (code !== '' && !code.startsWith('#') && !code.startsWith(')') && indentOf(lines[line]) <= indent) {
        end = line;
        break;
      }
    }
    if (cursorLine < end && (inside === undefined || candidate.line > inside.line)) {
      inside = candidate;
    }
  }
  return inside?.name;
}

interface ReportClass {
  name?: unknown;
  status?: unknown;
  skip_reason?: unknown;
  partial_reason?: unknown;
}

/** A short line for the notification, from the server's answer: the JSON report
 *  (`classes`, `issues_total`), `{error}`, or a plain message. */
export function summaryOf(result: unknown): string {
  if (typeof result === 'string' && result.trim() !== '') {
    return result.trim().split('\n')[0];
  }
  if (typeof result !== 'object' || result === null) {
    return 'verification finished; the findings are in the Problems panel and the report in the torchlint output.';
  }
  const report = result as { error?: unknown; summary?: unknown; message?: unknown; classes?: unknown;
                             issues_total?: unknown; device?: unknown };
  if (typeof report.error === 'string' && report.error !== '') {
    return `verification failed: ${report.error}`;
  }
  for (const text of [report.summary, report.message]) {
    if (typeof text === 'string' && text !== '') {
      return text;
    }
  }
  const classes = Array.isArray(report.classes) ? report.classes as ReportClass[] : [];
  const problems = typeof report.issues_total === 'number' ? report.issues_total : 0;
  const on = typeof report.device === 'string' ? ` on ${report.device}` : '';
  const verified = classes.filter((c) => c.status !== 'skipped').map((c) => String(c.name));
  const skipped = classes.filter((c) => c.status === 'skipped')
    .map((c) => `${String(c.name)} skipped: ${String(c.skip_reason ?? 'not built')}`);
  const partly = classes.filter((c) => c.status === 'partly verified')
    .map((c) => `${String(c.name)} partly verified: ${String(c.partial_reason ?? 'gradients skipped')}`);
  const found = problems === 0 ? 'no problems' : `${problems} problem${problems === 1 ? '' : 's'} (in the Problems panel)`;
  const parts = [verified.length > 0 ? `${found} in ${verified.join(', ')}${on}` : `nothing verified${on}`, ...partly,
                 ...skipped];
  return parts.join('; ');
}

interface ReportIssue {
  code?: unknown;
}

/** The output channel's one line for a verify run, from the server's answer:
 *  `verify model.py::Net: 2 findings (TL901, TL903) in 14.4 s on cpu`, or what failed. */
export function verifyLogLine(uri: string, className: string | undefined, result: unknown): string {
  const file = uri.split('/').pop() ?? uri;
  const head = `verify ${decodeURIComponent(file)}${className !== undefined ? `::${className}` : ''}: `;
  if (typeof result !== 'object' || result === null) {
    return head + (typeof result === 'string' && result.trim() !== '' ? result.trim().split('\n')[0] : 'no report');
  }
  const report = result as { error?: unknown; classes?: unknown; file_issues?: unknown; issues_total?: unknown;
                             duration_s?: unknown; device?: unknown };
  const took = typeof report.duration_s === 'number' ? ` in ${report.duration_s.toFixed(1)} s` : '';
  const on = typeof report.device === 'string' && report.device !== '' ? ` on ${report.device}` : '';
  if (typeof report.error === 'string' && report.error !== '') {
    return `${head}failed: ${report.error}${took}`;
  }
  const classes = Array.isArray(report.classes) ? report.classes as (ReportClass & { issues?: unknown })[] : [];
  const issues = [...(Array.isArray(report.file_issues) ? report.file_issues as ReportIssue[] : []),
                  ...classes.flatMap((c) => Array.isArray(c.issues) ? c.issues as ReportIssue[] : [])];
  const count = typeof report.issues_total === 'number' ? report.issues_total : issues.length;
  const codes = [...new Set(issues.map((issue) => String(issue.code)))];
  const found = count === 0 ? 'no findings' : `${count} finding${count === 1 ? '' : 's'} (${codes.join(', ')})`;
  const notes = classes.filter((c) => c.status === 'skipped' || c.status === 'partly verified')
    .map((c) => c.status === 'skipped' ? `${String(c.name)} skipped: ${String(c.skip_reason ?? 'not built')}`
      : `${String(c.name)} partly verified: ${String(c.partial_reason ?? 'gradients skipped')}`);
  return [`${head}${found}${took}${on}`, ...notes].join('; ');
}
