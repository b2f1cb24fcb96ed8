#!/usr/bin/env bash
# Installs what the JupyterLab end-to-end test needs, once: JupyterLab and jupyterlab-lsp, pinned,
# in a virtual environment of their own under $HOME/.cache/torchlint-e2e (not torchlint's .venv:
# Jupyter's hundred-odd packages stay out of the environment the other tests run in). The
# browser side (Debian's chromium, playwright-core) is the VS Code test's: tests/e2e_vscode/
# setup.sh installs it. Safe to run again: skipped when the environment already holds these pins.
set -euo pipefail

PINS=(jupyterlab==4.6.6 jupyterlab-lsp==5.3.0 jupyter-lsp==2.3.1)
PYTHON="${TORCHLINT_E2E_JUPYTER_PYTHON:-python3}"
CACHE="${TORCHLINT_E2E_CACHE:-$HOME/.cache/torchlint-e2e}"
VENV="$CACHE/jupyter-venv"
STAMP="$VENV/torchlint-pins.txt"   # written last: a half-made environment has none

if [ -x "$VENV/bin/jupyter-lab" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "${PINS[*]}" ]; then
  echo "setup: ${PINS[*]} already in $VENV"
else
  echo "setup: ${PINS[*]} into $VENV (about a minute)"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
  printf '%s\n' "${PINS[*]}" > "$STAMP"
fi

"$VENV/bin/python" -c "
import importlib.metadata as m
print('setup: ' + ', '.join('%s %s' % (n, m.version(n)) for n in ('jupyterlab', 'jupyterlab-lsp', 'jupyter-lsp')))"
for need in "$CACHE/driver/node_modules/playwright-core/package.json" /usr/bin/chromium; do
  [ -e "$need" ] || echo "setup: no $need yet: tests/e2e_vscode/setup.sh installs it"
done
echo "setup: ready in $VENV"
