// The "Verify module" command (torchlint.verifyModule). The server runs it
// (workspace/executeCommand): it imports the user's file and runs the module in a child
// process, so it executes workspace code and is refused in an untrusted workspace.
//
// The extension registers the command once, for its whole life, and the language client
// is kept from registering the server's command of the same name (serverCommands.ts). So
// the palette, the code lens and any other caller go through `verify` below: trust check,
// which class, saved file, then workspace/executeCommand to whichever server is running.
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import {
  classAt, initialKwargs, inputArguments, inputProblem, kwargsProblem, ModuleClass, rememberedInputs, rememberedKey,
  serverArguments, summaryOf, VERIFY_COMMAND, verifyArguments, VerifyArguments, verifyLogLine,
} from './verifyRequest';

export { VERIFY_COMMAND };
export const FORGET_COMMAND = 'torchlint.forgetVerifyInputs';

const WHOLE_FILE = 'All Module classes in the file';

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

/** The file's Module classes, as the server's "Verify" code lenses name them (none when
 *  the lens is turned off: then the whole file is verified). */
async function moduleClasses(document: vscode.TextDocument): Promise<ModuleClass[]> {
  const lenses = await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', document.uri);
  const classes: ModuleClass[] = [];
  for (const lens of lenses ?? []) {
    const argument = lens.command?.command === VERIFY_COMMAND ? lens.command.arguments?.[0] : undefined;
    const name = (argument as { className?: unknown } | undefined)?.className;
    if (typeof name === 'string' && !classes.some((known) => known.name === name)) {
      const hints = verifyArguments([argument], undefined);
      classes.push({ name, line: lens.range.start.line,
                     ...(hints?.needsArguments ? { needsArguments: hints.needsArguments } : {}),
                     ...(hints?.needsInputs ? { needsInputs: hints.needsInputs } : {}) });
    }
  }
  return classes.sort((a, b) => a.line - b.line);
}

/** Asks for the constructor arguments a class needs (the box starts with what was given last
 *  time in this workspace) and remembers them. False when the user dismissed the box. */
async function askForArguments(request: VerifyArguments, state: vscode.Memento | undefined): Promise<boolean> {
  const needs = request.needsArguments ?? [];
  if (request.className === undefined || needs.length === 0 || request.initKwargs !== undefined) {
    return true;
  }
  const key = rememberedKey(request.uri, request.className);
  const remembered = state?.get<Record<string, string>>(REMEMBERED, {}) ?? {};
  const text = await vscode.window.showInputBox({
    title: `torchlint: arguments to build ${request.className}`,
    prompt: `Python literals as keyword arguments, for example ${needs.map((n) => `${n}=64`).join(', ')}. ` +
      'Remembered for this workspace.',
    value: initialKwargs(remembered[key], needs),
    ignoreFocusOut: true,
    validateInput: (value) => kwargsProblem(value, needs),
  });
  if (text === undefined) {
    return false;
  }
  request.initKwargs = text;
  await state?.update(REMEMBERED, { ...remembered, [key]: text });
  return true;
}

/** forward's inputs for a class: those remembered for it in this workspace, without asking;
 *  else, when its lens says the last run found none that fit, one box per input (a shape or a
 *  Python expression), remembered. False when the user dismissed a box. */
async function provideInputs(request: VerifyArguments, state: vscode.Memento | undefined,
                             output: vscode.OutputChannel): Promise<boolean> {
  if (request.className === undefined || request.inputShapes !== undefined || request.inputs !== undefined) {
    return true;
  }
  const key = rememberedKey(request.uri, request.className);
  const remembered = state?.get<Record<string, unknown>>(REMEMBERED_INPUTS, {}) ?? {};
  const reused = rememberedInputs(remembered, key, request.needsInputs);
  if (reused !== undefined) {
    output.appendLine(`[verify] ${request.className}: the inputs remembered for this workspace: ${reused.join('; ')} ` +
      '(the command "torchlint: Forget remembered verify inputs" forgets them)');
    Object.assign(request, inputArguments(reused));
    return true;
  }
  const needs = request.needsInputs ?? [];
  const values: string[] = [];
  for (const [index, name] of needs.entries()) {
    const value = await vscode.window.showInputBox({
      title: `torchlint: input ${index + 1} of ${needs.length} to ${request.className}.forward: ${name}`,
      prompt: `The shape of ${name}, for example 2, 3, 224, 224, or a Python expression, for example ` +
        'torch.randint(0, 100, (2, 16)). Remembered for this workspace.',
      ignoreFocusOut: true,
      validateInput: inputProblem,
    });
    if (value === undefined) {
      return false;
    }
    values.push(value.trim());
  }
  if (values.length > 0) {
    Object.assign(request, inputArguments(values));
    await state?.update(REMEMBERED_INPUTS, { ...remembered, [key]: values });
  }
  return true;
}

/** Forgets, for this workspace, the inputs and constructor arguments given for every class. */
async function forget(state: vscode.Memento | undefined): Promise<void> {
  const counted = Object.keys(state?.get<Record<string, unknown>>(REMEMBERED_INPUTS, {}) ?? {}).length +
    Object.keys(state?.get<Record<string, unknown>>(REMEMBERED, {}) ?? {}).length;
  await state?.update(REMEMBERED_INPUTS, undefined);
  await state?.update(REMEMBERED, undefined);
  void vscode.window.showInformationMessage(counted === 0
    ? 'torchlint: no verify inputs or constructor arguments were remembered in this workspace.'
    : 'torchlint: forgot the verify inputs and constructor arguments remembered in this workspace; ' +
      'the next run asks again.');
}

/** From the palette: the class under the cursor, the only class, or the user's pick.
 *  Null when the user dismissed the pick; undefined means every class of the file. */
async function chooseClass(document: vscode.TextDocument): Promise<ModuleClass | undefined | null> {
  const classes = await moduleClasses(document);
  if (classes.length <= 1) {
    return classes[0];
  }
  const editor = vscode.window.activeTextEditor;
  if (editor !== undefined && editor.document === document) {
    const lines = Array.from({ length: document.lineCount }, (_, line) => document.lineAt(line).text);
    const under = classAt(lines, classes, editor.selection.active.line);
    if (under !== undefined) {
      return classes.find((c) => c.name === under);
    }
  }
  const picked = await vscode.window.showQuickPick(
    [...classes.map((c) => ({ label: c.name, description: `line ${c.line + 1}` })), { label: WHOLE_FILE, description: '' }],
    { title: 'torchlint: verify which module?', placeHolder: 'The nn.Module class to build and run' });
  if (picked === undefined) {
    return null;
  }
  return picked.label === WHOLE_FILE ? undefined : classes.find((c) => c.name === picked.label);
}

const REMEMBERED = 'torchlint.verify.initKwargs';  // rememberedKey -> the text given
const REMEMBERED_INPUTS = 'torchlint.verify.inputs';  // rememberedKey -> one text per input of forward

async function verify(args: unknown[], client: () => LanguageClient | undefined,
                      output: vscode.OutputChannel, state: vscode.Memento | undefined): Promise<unknown> {
  if (!vscode.workspace.isTrusted) {
    await refuseUntrusted();
    return undefined;
  }
  const request: VerifyArguments | undefined = verifyArguments(args, activePythonUri());
  if (request === undefined) {
    void vscode.window.showInformationMessage('torchlint: open the Python file whose module you want to verify.');
    return undefined;
  }
  if (vscode.Uri.parse(request.uri).scheme !== 'file') {
    void vscode.window.showInformationMessage('torchlint: save the file first: verification imports it from disk.');
    return undefined;
  }
  const open = vscode.workspace.textDocuments.find((document) => document.uri.toString() === request.uri);
  if (args.length === 0 && open !== undefined) {
    const chosen = await chooseClass(open);
    if (chosen === null) {
      return undefined;
    }
    if (chosen !== undefined) {
      request.className = chosen.name;
      if (chosen.needsArguments !== undefined) {
        request.needsArguments = chosen.needsArguments;
      }
      if (chosen.needsInputs !== undefined) {
        request.needsInputs = chosen.needsInputs;
      }
    }
  }
  if (!await askForArguments(request, state) || !await provideInputs(request, state, output)) {
    return undefined;
  }
  // The server imports the file from disk, as `python file.py` would: save it first
  // (the Python extension's "Run Python File" does the same).
  if (open !== undefined && open.isDirty) {
    await open.save();
  }
  const running = client();
  if (running === undefined || !running.isRunning()) {
    void vscode.window.showWarningMessage('torchlint: the server is not running, so it cannot verify: see the torchlint output.');
    return undefined;
  }
  if (!running.initializeResult?.capabilities.executeCommandProvider?.commands?.includes(VERIFY_COMMAND)) {
    void vscode.window.showInformationMessage(
      'torchlint: this version of the torchlint server does not offer runtime verification.');
    return undefined;
  }
  // The server reports progress (cancellable) and publishes the findings as diagnostics.
  const result: unknown = await running.sendRequest(ExecuteCommandRequest.type,
    { command: VERIFY_COMMAND, arguments: [serverArguments(request)] });
  output.appendLine(verifyLogLine(request.uri, request.className, result));
  const error = (result as { error?: unknown } | null)?.error;
  if (typeof error === 'string' && error !== '') {
    return result;  // the server shows every failure itself (to every editor)
  }
  void vscode.window.showInformationMessage(`torchlint: ${summaryOf(result)}`);
  return result;
}

/** Registers torchlint.verifyModule, and torchlint.forgetVerifyInputs, for the extension's life;
 *  `client` is the server of the moment; `state` (the workspace's) remembers the constructor
 *  arguments and the inputs given per class. */
export function registerVerifyCommand(client: () => LanguageClient | undefined,
                                      output: vscode.OutputChannel, state?: vscode.Memento): vscode.Disposable {
  return vscode.Disposable.from(
    vscode.commands.registerCommand(VERIFY_COMMAND, async (...args: unknown[]) => {
      try {
        return await verify(args, client, output, state);
      } catch (error) {
        output.appendLine(`[verify] failed: ${error instanceof Error && error.stack ? error.stack : String(error)}`);
        void vscode.window.showErrorMessage(`torchlint: verification failed: ${String(error)}`);
        return undefined;
      }
    }),
    vscode.commands.registerCommand(FORGET_COMMAND, () => forget(state)));
}
