// The "Verify module on GPU" command (torchlint.verifyModule). The server runs it
// (workspace/executeCommand): it imports the user's file and runs the module in a child
// process, so it executes workspace code and is refused in an untrusted workspace.
//
// When the server advertises the command, vscode-languageclient registers it and routes
// every call through `middleware.executeCommand`, i.e. `gateVerify` below. When it does not
// (an older server), `registerFallback` registers the same command name with a message.
import * as vscode from 'vscode';
import { VERIFY_COMMAND, summaryOf, verifyArguments } from './verifyRequest';

export { VERIFY_COMMAND };

function activePythonUri(): string | undefined {
  const editor = vscode.window.activeTextEditor;
  return editor !== undefined && editor.document.languageId === 'python' ? editor.document.uri.toString() : undefined;
}

async function refuseUntrusted(): Promise<void> {
  const manage = 'Manage Workspace Trust';
  const choice = await vscode.window.showWarningMessage(
    'torchlint: runtime verification runs this workspace\'s code, so it is disabled until you trust the workspace.',
    manage);
  if (choice === manage) {
    await vscode.commands.executeCommand('workbench.trust.manage');
  }
}

/** `middleware.executeCommand`: trust gate, arguments, saved file, then the server's answer. */
export async function gateVerify(command: string, args: unknown[],
                                 next: (command: string, args: unknown[]) => Promise<unknown>,
                                 output: vscode.OutputChannel): Promise<unknown> {
  if (command !== VERIFY_COMMAND) {
    return next(command, args);
  }
  if (!vscode.workspace.isTrusted) {
    await refuseUntrusted();
    return undefined;
  }
  const request = verifyArguments(args, activePythonUri());
  if (request === undefined) {
    void vscode.window.showInformationMessage('torchlint: open the Python file whose module you want to verify.');
    return undefined;
  }
  // The server imports the file from disk, as `python file.py` would: save it first
  // (the Python extension's "Run Python File" does the same).
  const open = vscode.workspace.textDocuments.find((document) => document.uri.toString() === request.uri);
  if (open !== undefined && open.isDirty) {
    await open.save();
  }
  const what = request.className ?? vscode.Uri.parse(request.uri).path.split('/').pop();
  output.appendLine(`[verify] ${what}: ${JSON.stringify(request)}`);
  const result = await next(command, [request]);
  output.appendLine(`[verify] result: ${typeof result === 'string' ? result : JSON.stringify(result, null, 2)}`);
  void vscode.window.showInformationMessage(`torchlint: ${summaryOf(result)}`);
  return result;
}

/** The command for a server without runtime verification; undefined when the server has it. */
export function registerFallback(serverCommands: readonly string[] | undefined): vscode.Disposable | undefined {
  if (serverCommands?.includes(VERIFY_COMMAND)) {
    return undefined;
  }
  return vscode.commands.registerCommand(VERIFY_COMMAND, async () => {
    if (!vscode.workspace.isTrusted) {
      await refuseUntrusted();
      return;
    }
    void vscode.window.showInformationMessage(
      'torchlint: this version of the torchlint server does not offer runtime verification.');
  });
}
