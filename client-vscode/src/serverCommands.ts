// vscode-languageclient registers every command of the server's `executeCommandProvider`
// as a VS Code command. The extension registers some of those itself (the verify command,
// which checks workspace trust and asks for the class first); registering them a second
// time would fail with "command already exists". `leavingOut` wraps the client's
// executeCommand feature so that it skips those; every other feature passes through.
// No runtime import of vscode: the unit tests run under plain node.

export const EXECUTE_COMMAND_METHOD = 'workspace/executeCommand';

interface CommandOptions {
  commands?: string[];
}

function withoutOwned<T extends CommandOptions | undefined>(options: T, owned: readonly string[]): T {
  if (options === undefined || options === null || !Array.isArray(options.commands)) {
    return options;
  }
  return { ...options, commands: options.commands.filter((command) => !owned.includes(command)) };
}

/** `feature` itself, or, for the executeCommand feature, a view of it that never sees
 *  the `owned` commands, neither at initialize nor in a later dynamic registration. */
export function leavingOut<F extends object>(feature: F, owned: readonly string[]): F {
  const method = (feature as { registrationType?: { method?: unknown } }).registrationType?.method;
  if (method !== EXECUTE_COMMAND_METHOD) {
    return feature;
  }
  return new Proxy(feature, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') {
        return value;
      }
      if (property === 'initialize') {
        return (capabilities: { executeCommandProvider?: CommandOptions }, ...rest: unknown[]) =>
          value.call(target, { ...capabilities, executeCommandProvider: withoutOwned(capabilities.executeCommandProvider, owned) },
            ...rest);
      }
      if (property === 'register') {
        return (data: { registerOptions?: CommandOptions }) =>
          value.call(target, { ...data, registerOptions: withoutOwned(data.registerOptions, owned) });
      }
      return value.bind(target);
    },
  });
}
