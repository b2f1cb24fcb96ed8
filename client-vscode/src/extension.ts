// The torchlint extension: starts the torchlint language server with the right Python,
// keeps it in step with the settings, and contributes the restart / fix-all / verify /
// output commands. All the checking happens in the server.
import * as os from 'os';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification, DynamicFeature, LanguageClient, LanguageClientOptions, RevealOutputChannelOn,
  ServerOptions, State, StaticFeature, TransportKind,
} from 'vscode-languageclient/node';

import {
  chooseInterpreter, describeInterpreter, Interpreter, onPythonEnvironmentChange, pythonExtensionInterpreter,
  sourceDescription,
} from './interpreter';
import { importStrategy, probeInterpreter, serverExecutable } from './launcher';
import { reactionTo, SECTION, serverSettings, ServerSettings } from './settings';
import { leavingOut } from './serverCommands';
import { registerVerifyCommand, VERIFY_COMMAND } from './verify';

// Also the prefix of the `torchlint.trace.server` setting the language client reads.
const CLIENT_ID = 'torchlint';
const FIX_ALL_KIND = vscode.CodeActionKind.SourceFixAll.append('torchlint');

let extensionPath = '';
let output: vscode.OutputChannel;
let status: vscode.StatusBarItem;
let client: LanguageClient | undefined;
let interpreter: Interpreter | undefined;
// Restarts run one after another, never interleaved.
let lifecycle: Promise<void> = Promise.resolve();

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionPath = context.extensionPath;
  output = vscode.window.createOutputChannel('torchlint');
  status = vscode.window.createStatusBarItem('torchlint.status', vscode.StatusBarAlignment.Left, 0);
  status.name = 'torchlint';
  status.command = 'torchlint.showOutput';
  context.subscriptions.push(output, status,
    vscode.commands.registerCommand('torchlint.restart', () => restart('restart requested')),
    vscode.commands.registerCommand('torchlint.showOutput', () => output.show(true)),
    vscode.commands.registerCommand('torchlint.fixAll', fixAll),
    registerVerifyCommand(() => client, output, context.workspaceState),
    vscode.workspace.onDidChangeConfiguration((change) => {
      const reaction = reactionTo(change);
      if (reaction === 'restart') {
        void restart('settings changed');
      } else if (reaction === 'notify') {
        void sendSettings();
      }
    }),
    // Trust brings the workspace's interpreter setting and the verification into play.
    vscode.workspace.onDidGrantWorkspaceTrust(() => restart('workspace trusted')),
    { dispose: () => { void stop(); } });
  // Without the Python extension this resolves to undefined and nothing is watched.
  void onPythonEnvironmentChange(vscode.extensions, () => {
    if (interpreter?.source !== 'setting') {
      void restart('the Python extension\'s environment changed');
    }
  }).then((subscription) => subscription && context.subscriptions.push(subscription));
  await restart('activated');
}

export function deactivate(): Thenable<void> {
  return stop();
}

function restart(reason: string): Promise<void> {
  lifecycle = lifecycle.then(() => start(reason)).catch((error) => {
    showStatus('error', `torchlint could not start: ${String(error)}`);
    output.appendLine(`Start failed: ${error instanceof Error && error.stack ? error.stack : String(error)}`);
  });
  return lifecycle;
}

async function stop(): Promise<void> {
  const stopping = client;
  client = undefined;
  if (stopping !== undefined) {
    try {
      await stopping.stop(3000);
    } catch (error) {
      output.appendLine(`The server did not stop cleanly: ${String(error)}`);
    }
  }
}

function workspaceFolder(): vscode.WorkspaceFolder | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  return (active && vscode.workspace.getWorkspaceFolder(active)) ?? vscode.workspace.workspaceFolders?.[0];
}

function currentSettings(scope?: vscode.Uri): ServerSettings {
  return serverSettings(vscode.workspace.getConfiguration(SECTION, scope),
    { trusted: vscode.workspace.isTrusted, interpreter: interpreter?.command ?? '',
      interpreterSource: interpreter !== undefined ? sourceDescription(interpreter.source) : '' });
}

async function sendSettings(): Promise<void> {
  if (client?.isRunning()) {
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: currentSettings() } });
  }
}

async function start(reason: string): Promise<void> {
  await stop();
  const config = vscode.workspace.getConfiguration(SECTION);
  if (!config.get<boolean>('enable', true)) {
    output.appendLine('torchlint.enable is off: the server is stopped.');
    showStatus('off', 'torchlint is turned off (torchlint.enable)');
    return;
  }
  showStatus('starting', 'torchlint is starting');
  const folder = workspaceFolder();
  const setting = config.get<string>('interpreter', '');
  const fromPythonExtension = setting.trim() === ''
    ? await pythonExtensionInterpreter(vscode.extensions, folder?.uri, (message) => output.appendLine(message))
    : undefined;
  interpreter = chooseInterpreter(setting, fromPythonExtension,
    { workspaceFolder: folder?.uri.fsPath, home: os.homedir(), env: process.env });
  output.appendLine(`Starting the server (${reason}) with ${describeInterpreter(interpreter)}.`);

  const probe = await probeInterpreter(interpreter.command);
  if (!probe.ok) {
    const message = `torchlint cannot use the Python interpreter ${describeInterpreter(interpreter)}: ${probe.problem}. ` +
      'Set torchlint.interpreter to a Python 3.10+ interpreter.';
    output.appendLine(message);
    showStatus('error', message);
    void vscode.window.showErrorMessage(message, 'Open Settings', 'Show Output').then((choice) => {
      if (choice === 'Open Settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'torchlint.interpreter');
      } else if (choice === 'Show Output') {
        output.show(true);
      }
    });
    return;
  }

  const strategy = importStrategy(config.get<unknown>('importStrategy'));
  const executable = serverExecutable(interpreter.command, extensionPath, folder?.uri.fsPath, process.env, strategy);
  if (strategy === 'fromEnvironment') {
    output.appendLine('torchlint.importStrategy is fromEnvironment: serving the torchlint installed for that interpreter.');
  }
  const serverOptions: ServerOptions = { ...executable, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    // The Python cells of notebooks (Jupyter) too: the server syncs them as notebook documents.
    documentSelector: [{ scheme: 'file', language: 'python' }, { scheme: 'untitled', language: 'python' },
      { notebook: '*', language: 'python' }],
    diagnosticCollectionName: 'torchlint',
    outputChannel: output,
    traceOutputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: currentSettings(),
    middleware: {
      workspace: {
        // The server asks for the `torchlint` section: answer with what it should see
        // (the interpreter actually used, no verify lens in an untrusted workspace).
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers;
          }
          return params.items.map((item, index) => item.section === SECTION
            ? currentSettings(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined)
            : answers[index]);
        },
      },
    },
  };
  const starting = new TorchlintClient(CLIENT_ID, 'torchlint', serverOptions, clientOptions);
  starting.onDidChangeState((event) => {
    if (starting !== client) {
      return;  // an old client going down
    }
    if (event.newState === State.Running) {
      showStatus('running', `torchlint ${runningDescription(probe.version)}`);
    } else if (event.newState === State.Stopped) {
      showStatus('error', 'The torchlint server stopped: see the output for why.');
    }
  });
  client = starting;
  await starting.start();
  const server = starting.initializeResult?.serverInfo;
  output.appendLine(`Server ${server?.name ?? 'torchlint'} ${server?.version ?? ''} is running.`);
  showStatus('running', `torchlint ${server?.version ?? ''} ${runningDescription(probe.version)}`);
}

/** A language client that leaves the commands the extension registers itself to the extension. */
class TorchlintClient extends LanguageClient {
  registerFeature(feature: StaticFeature | DynamicFeature<unknown>): void {
    super.registerFeature(leavingOut(feature, [VERIFY_COMMAND]));
  }
}

function runningDescription(version: string | undefined): string {
  return `on Python ${version ?? '?'} (${interpreter !== undefined ? describeInterpreter(interpreter) : '?'})`;
}

function showStatus(state: 'starting' | 'running' | 'error' | 'off', tooltip: string): void {
  const icons = { starting: '$(sync~spin)', running: '$(check)', error: '$(error)', off: '$(circle-slash)' };
  status.text = `${icons[state]} torchlint`;
  status.tooltip = `${tooltip}\nClick to show the torchlint output.`;
  status.backgroundColor = state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  status.show();
}

/** Applies the server's `source.fixAll.torchlint` action (every safe fix) to the active file. */
async function fixAll(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || editor.document.languageId !== 'python') {
    void vscode.window.showInformationMessage('torchlint: open a Python file to fix.');
    return;
  }
  const document = editor.document;
  const whole = new vscode.Range(document.lineAt(0).range.start, document.lineAt(document.lineCount - 1).range.end);
  const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
    'vscode.executeCodeActionProvider', document.uri, whole, FIX_ALL_KIND.value);
  const action = actions?.find((candidate) => candidate.kind !== undefined && FIX_ALL_KIND.contains(candidate.kind));
  if (action === undefined) {
    void vscode.window.showInformationMessage('torchlint: no safe fixes to apply.');
    return;
  }
  if (action.edit !== undefined) {
    await vscode.workspace.applyEdit(action.edit);
  }
  if (action.command !== undefined) {
    await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
  }
}
