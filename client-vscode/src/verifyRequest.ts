// The verify command's arguments, the class it targets and its notification line, apart
// from `vscode` so the unit tests run under plain node.

export const VERIFY_COMMAND = 'torchlint.verifyModule';

export interface VerifyArguments {
  uri: string;
  className?: string;
  device?: string;
}

/** An nn.Module class of the file: its name and the 0-based line of its `class` statement. */
export interface ModuleClass {
  name: string;
  line: number;
}

/** The request's argument from however the command was invoked: a code lens passes
 *  `{uri, className}`, an editor title or explorer menu passes a Uri, the palette nothing
 *  (then the active Python editor's file is verified). Undefined when there is no file. */
export function verifyArguments(args: unknown[], activeUri: string | undefined): VerifyArguments | undefined {
  const first = args[0];
  if (typeof first === 'object' && first !== null && typeof (first as { uri?: unknown }).uri === 'string') {
    const given = first as { uri: string; className?: unknown; device?: unknown };
    const result: VerifyArguments = { uri: given.uri };
    if (typeof given.className === 'string' && given.className !== '') {
      result.className = given.className;
    }
    if (typeof given.device === 'string' && given.device !== '') {
      result.device = given.device;
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
  const found = problems === 0 ? 'no problems' : `${problems} problem${problems === 1 ? '' : 's'} (in the Problems panel)`;
  const parts = [verified.length > 0 ? `${found} in ${verified.join(', ')}${on}` : `nothing verified${on}`, ...skipped];
  return parts.join('; ');
}
