"""Starts the torchlint language server with the libraries bundled in the extension.

The VS Code extension runs ``<python> launch.py``. The bundled ``libs`` folder (torchlint
and its pure-Python dependencies) goes first on this process's ``sys.path`` only. It is
deliberately not put in PYTHONPATH: that would be inherited by the runtime verification's
child process, which runs the user's code with the user's own packages.
"""
import os
import runpy
import sys

# The module that serves LSP on stdio, and its arguments (``python -m torchlint.lsp``).
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
    # Without a bundle (running the extension from a source checkout) the interpreter's own
    # torchlint is used.
    if os.path.isdir(LIBS):
        sys.path.insert(0, LIBS)
    module, arguments = SERVER_MODULE[0], list(SERVER_MODULE[1:])
    sys.argv = [module] + arguments
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
