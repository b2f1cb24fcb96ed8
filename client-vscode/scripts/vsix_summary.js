#!/usr/bin/env node
// The last step of `npm run package`: prints the .vsix's size and file count, and fails when
// the package lacks the server or carries what bundle_server.js leaves out (a stale bundle).
//
// Usage: node client-vscode/scripts/vsix_summary.js [FILE.vsix]   (default: the package.json version's)
'use strict';

const fs = require('fs');
const path = require('path');

const REPO = path.resolve(__dirname, '..', '..');

// A .vsix is a zip: its entry names are in the central directory, found through the
// end-of-central-directory record at the end of the file (no zip library needed).
function zipEntryNames(file) {
  const data = fs.readFileSync(file);
  let end = -1;
  for (let at = data.length - 22; at >= Math.max(0, data.length - 22 - 0xffff); at--) {
    if (data.readUInt32LE(at) === 0x06054b50) { end = at; break; }
  }
  if (end < 0) throw new Error(`${file} is not a zip archive`);
  const count = data.readUInt16LE(end + 10);
  let at = data.readUInt32LE(end + 16);
  const names = [];
  for (let index = 0; index < count; index++) {
    if (data.readUInt32LE(at) !== 0x02014b50) throw new Error(`${file}: damaged central directory`);
    const nameLength = data.readUInt16LE(at + 28);
    const extraLength = data.readUInt16LE(at + 30);
    const commentLength = data.readUInt16LE(at + 32);
    names.push(data.toString('utf8', at + 46, at + 46 + nameLength));
    at += 46 + nameLength + extraLength + commentLength;
  }
  return names;
}

function main() {
  const version = require(path.join(REPO, 'package.json')).version;
  const vsix = path.resolve(process.argv[2] || path.join(REPO, `torchlint-${version}.vsix`));
  const names = zipEntryNames(vsix).filter((name) => !name.endsWith('/'));
  const libs = 'extension/client-vscode/bundled/libs/';
  const problems = [];
  for (const needed of ['extension/package.json', 'extension/client-vscode/out/extension.js',
    'extension/client-vscode/bundled/launch.py', `${libs}torchlint/lsp/server.py`, `${libs}pygls/`,
    `${libs}jedi/third_party/typeshed/stdlib/builtins.pyi`]) {
    if (!names.some((name) => name.startsWith(needed))) problems.push(`missing ${needed}`);
  }
  for (const unwanted of [`${libs}jedi/third_party/typeshed/stubs/`, `${libs}jedi/third_party/django-stubs/`]) {
    if (names.some((name) => name.startsWith(unwanted))) problems.push(`carries ${unwanted} (run npm run bundle-server)`);
  }
  if (names.some((name) => name.includes('/__pycache__/'))) problems.push('carries __pycache__ folders');
  const size = fs.statSync(vsix).size;
  console.log(`${path.relative(process.cwd(), vsix)}: ${(size / 1048576).toFixed(2)} MiB (${size} bytes), ${names.length} files`);
  if (problems.length > 0) {
    console.error(`${path.basename(vsix)} is not what the extension needs:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
}

main();
