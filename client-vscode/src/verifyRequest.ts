// The verify command's arguments and its notification line, apart from `vscode` so the
// unit tests run under plain node.

export const VERIFY_COMMAND = 'torchlint.verifyModule';

export interface VerifyArguments {
  uri: string;
  className?: string;
  device?: string;
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

/** A short line for the notification, from whatever report the server answered with. */
export function summaryOf(result: unknown): string {
  if (typeof result === 'string' && result.trim() !== '') {
    return result.trim().split('\n')[0];
  }
  if (typeof result === 'object' && result !== null) {
    const summary = (result as { summary?: unknown; message?: unknown }).summary ??
      (result as { message?: unknown }).message;
    if (typeof summary === 'string' && summary !== '') {
      return summary;
    }
  }
  return 'verification finished; the findings are in the Problems panel and the report in the torchlint output.';
}
