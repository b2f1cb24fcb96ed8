#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, once: Debian packages (chromium, ripgrep,
# the headers code-server's native modules build against), code-server 4.100.3 and
# playwright-core, both under $HOME/.cache/torchlint-e2e. Safe to run again: each step is
# skipped when its result is already there. Works offline apart from apt and npm.
set -euo pipefail

CODE_SERVER_VERSION=4.100.3   # VS Code 1.100.3; the newest that installs on Node 20
PLAYWRIGHT_VERSION=1.65.1
RG_CACHE=vscode-ripgrep-cache-1.15.11   # the cache folder @vscode/ripgrep 1.15.11 looks in
CACHE="${TORCHLINT_E2E_CACHE:-$HOME/.cache/torchlint-e2e}"
mkdir -p "$CACHE"

missing=()
for need in chromium:/usr/bin/chromium ripgrep:/usr/bin/rg pkg-config:/usr/bin/pkg-config \
            libkrb5-dev:/usr/include/krb5.h; do
  [ -e "${need#*:}" ] || missing+=("${need%%:*}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$CACHE/cs/node_modules/.bin/code-server" ]; then
  echo "setup: code-server $CODE_SERVER_VERSION (about a minute)"
  # @vscode/ripgrep downloads rg from a host we cannot reach; its installer looks in
  # $TMPDIR/$RG_CACHE first, so hand it Debian's rg in the archive name it expects.
  rgdir="$CACHE/rgcache"
  mkdir -p "$rgdir/$RG_CACHE"
  tarball="$rgdir/$RG_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
  if [ ! -f "$tarball" ]; then
    cp /usr/bin/rg "$rgdir/rg"
    (cd "$rgdir" && tar czf "$tarball" rg && rm rg)
  fi
  mkdir -p "$CACHE/cs"
  # As root, code-server's own postinstall.sh refuses to run unless the environment has
  # npm_config_unsafe_perm=true (it reads the variable itself; npm 7+ dropped the option, so
  # no --unsafe-perm flag is passed to npm). Not needed for other users.
  as_root=(); [ "$(id -u)" -ne 0 ] || as_root=(npm_config_unsafe_perm=true)
  (cd "$CACHE/cs" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    env "${as_root[@]}" npm_config_yes=true TMPDIR="$rgdir" \
      npm install --no-save --no-audit --no-fund "code-server@$CODE_SERVER_VERSION")
fi

if [ ! -f "$CACHE/driver/node_modules/playwright-core/package.json" ]; then
  echo "setup: playwright-core $PLAYWRIGHT_VERSION (the browser is Debian's chromium)"
  mkdir -p "$CACHE/driver"
  (cd "$CACHE/driver" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-save --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION")
fi

node -p "'code-server ' + require('$CACHE/cs/node_modules/code-server/package.json').version"
echo "setup: ready in $CACHE"
