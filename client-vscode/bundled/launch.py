"""Starts the torchlint language server, from the extension's bundle or the environment.

The VS Code extension runs ``<python> launch.py`` (``torchlint.importStrategy`` useBundled):
the bundled ``libs`` folder (torchlint and its pure-Python dependencies) goes first on this
process's ``sys.path`` only. It is deliberately not put in PYTHONPATH: that would be inherited
by the runtime verification's child process, which runs the user's code with the user's own
packages. ``launch.py --from-environment`` (importStrategy fromEnvironment) leaves the bundle
out and serves the torchlint installed in this interpreter's environment.
"""
import importlib.util
import os
import runpy
import sys

# The module that serves LSP on stdio, and its arguments (``python -m torchlint serve``).
SERVER_MODULE = ("torchlint", "serve")
MINIMUM_PYTHON = (3, 10)  # the bundled jedi 0.20 and cattrs 26 need 3.10

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = os.path.join(HERE, "libs")


def main():
    if sys.version_info < MINIMUM_PYTHON:
        sys.stderr.write("torchlint needs Python %d.%d or newer; %s is %s\n"
                         % (MINIMUM_PYTHON + (sys.executable, sys.version.split()[0])))
        return 2
    # This folder itself is sys.path[0] (the script's folder): nothing to import from here.
    if sys.path and os.path.abspath(sys.path[0] or ".") == HERE:
        del sys.path[0]
    from_environment = "--from-environment" in sys.argv[1:]
    # Without a bundle (running the extension from a source checkout) the interpreter's own
    # torchlint is used.
    if os.path.isdir(LIBS) and not from_environment:
        sys.path.insert(0, LIBS)
    module, arguments = SERVER_MODULE[0], list(SERVER_MODULE[1:])
    if from_environment and importlib.util.find_spec(module) is None:
        sys.stderr.write("torchlint.importStrategy is fromEnvironment, but %s has no torchlint installed: "
                         "install it there from a torchlint checkout or wheel (`%s -m pip install /path/to/torchlint`; "
                         "torchlint is on no package index yet), or set torchlint.importStrategy to useBundled\n"
                         % (sys.executable, sys.executable))
        return 2
    sys.argv = [module] + arguments
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
