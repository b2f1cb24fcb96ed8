#!/usr/bin/env node
// Puts the torchlint server and its pure-Python dependencies into client-vscode/bundled/libs,
// which launch.py puts first on sys.path: the extension then works with any Python 3.10+,
// even one without a single package installed.
//
// Wheels are pinned with their sha256 in client-vscode/bundle-requirements.txt (pip checks
// them: --require-hashes), pure-Python (py3-none-any) only, and kept in client-vscode/.wheels:
// the first run downloads them from PyPI with pip, later runs install offline from there.
// torchlint itself is copied from this repository's server/torchlint (a pure package: no
// build step, so no build backend has to be fetched).
//
// Usage: node client-vscode/scripts/bundle_server.js   (npm run bundle-server)
// The Python that runs pip: $TORCHLINT_BUNDLE_PYTHON, else python3.
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

// The oldest Python the bundle supports (jedi 0.20 and cattrs 26 need 3.10).
const PYTHON_VERSION = '3.10';

const CLIENT = path.resolve(__dirname, '..');
const REPO = path.resolve(CLIENT, '..');
const LIBS = path.join(CLIENT, 'bundled', 'libs');
const WHEELS = path.join(CLIENT, '.wheels');
const PYTHON = process.env.TORCHLINT_BUNDLE_PYTHON || 'python3';
const REQUIREMENTS = path.join(CLIENT, 'bundle-requirements.txt');

// `name==version` of each line of the requirements file (comments and hashes left out).
function readPins(file) {
  return fs.readFileSync(file, 'utf8').split('\n')
    .map((line) => line.replace(/#.*/, '').trim().split(/\s+/)[0])
    .filter((pin) => pin !== undefined && pin !== '');
}

const PINNED = readPins(REQUIREMENTS);

function run(args) {
  console.log(`$ ${PYTHON} ${args.join(' ')}`);
  execFileSync(PYTHON, args, { stdio: 'inherit', env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
}

// A wheel's file name starts with the project name normalised to lower case and underscores.
function wheelPresent(pin) {
  const [name, version] = pin.split('==');
  const prefix = `${name.toLowerCase().replace(/[-.]+/g, '_')}-${version}-`;
  return fs.existsSync(WHEELS) && fs.readdirSync(WHEELS).some((file) =>
    file.toLowerCase().startsWith(prefix) && file.endsWith('-none-any.whl'));
}

function downloadMissingWheels() {
  const missing = PINNED.filter((pin) => !wheelPresent(pin));
  if (missing.length === 0) {
    console.log(`All ${PINNED.length} wheels are in ${path.relative(REPO, WHEELS)}: installing offline.`);
    return;
  }
  fs.mkdirSync(WHEELS, { recursive: true });
  // --platform any + --abi none: pure-Python wheels only, whatever this machine is. The whole
  // file is passed (pip needs every pin's hash in hash-checking mode); present wheels are reused.
  run(['-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:', '--platform', 'any',
       '--implementation', 'py', '--abi', 'none', '--python-version', PYTHON_VERSION,
       '--require-hashes', '--dest', WHEELS, '-r', REQUIREMENTS]);
}

function copyPackage(from, to) {
  fs.mkdirSync(to, { recursive: true });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (entry.name === '__pycache__' || entry.name.endsWith('.pyc')) {
      continue;
    }
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      copyPackage(source, target);
    } else if (entry.isFile()) {
      fs.copyFileSync(source, target);
    }
  }
}

function removeCaches(folder) {
  for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === '__pycache__') {
        fs.rmSync(full, { recursive: true, force: true });
      } else {
        removeCaches(full);
      }
    }
  }
}

// What the server never reads, left out of the .vsix (vsce scans every packaged file for
// secrets, and these were 4,300 of its ~6,200 files). jedi's bundled typeshed keeps `stdlib`:
// jedi reads builtins, typing and the standard library from it (without it the jedi layer
// misses findings: tests/fixtures/jedi_project's `self.w = make_weight(3)`, a helper that
// returns `torch.zeros(n, n)`, is no longer seen as a tensor). Its
// `stubs` (third-party packages: requests, six, ...) and django-stubs describe libraries
// torchlint's rules never look into; jedi skips stub folders that are absent.
const NOT_SHIPPED = [
  'jedi/third_party/typeshed/stubs',
  'jedi/third_party/django-stubs',
];

function prune() {
  for (const relative of NOT_SHIPPED) {
    fs.rmSync(path.join(LIBS, relative), { recursive: true, force: true });
  }
}

function countFiles(folder) {
  let count = 0;
  for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
    count += entry.isDirectory() ? countFiles(path.join(folder, entry.name)) : 1;
  }
  return count;
}

function main() {
  downloadMissingWheels();
  fs.rmSync(LIBS, { recursive: true, force: true });
  run(['-m', 'pip', 'install', '--quiet', '--no-index', '--find-links', WHEELS, '--no-deps', '--no-compile',
       '--require-hashes', '--target', LIBS, '-r', REQUIREMENTS]);
  copyPackage(path.join(REPO, 'server', 'torchlint'), path.join(LIBS, 'torchlint'));
  fs.rmSync(path.join(LIBS, 'bin'), { recursive: true, force: true });  // console scripts: unused
  prune();
  removeCaches(LIBS);
  // The bundle must stand alone: import the server with site-packages switched off (-S -I).
  run(['-I', '-S', '-c',
       'import sys; sys.path.insert(0, sys.argv[1]); import torchlint.lsp.server, jedi, pygls; '
       + 'print("bundle imports cleanly: torchlint", torchlint.__version__, "pygls", '
       + '__import__("importlib.metadata").metadata.version("pygls"))', LIBS]);
  removeCaches(LIBS);
  console.log(`bundled: ${countFiles(LIBS)} files in ${path.relative(REPO, LIBS)}`);
}

main();
