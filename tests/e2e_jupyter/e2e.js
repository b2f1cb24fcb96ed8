#!/usr/bin/env node
// End-to-end test of torchlint in real JupyterLab (4.6.6, jupyterlab-lsp 5.3.0, jupyter-lsp
// 2.3.1) driven through headless Chromium with playwright-core.
//
//   tests/e2e_vscode/setup.sh      # once: chromium, playwright-core (shared with the VS Code test)
//   tests/e2e_jupyter/setup.sh     # once: JupyterLab + jupyterlab-lsp in a venv of their own
//   node tests/e2e_jupyter/e2e.js
//
// It starts `jupyter lab` on a free port with every bit of Jupyter state in a temporary folder
// and torchlint as jupyter-lsp's only language server, set up as docs/jupyterlab.md says (the
// server runs from this checkout: `python -m torchlint serve` with server/ on PYTHONPATH). It
// opens a notebook whose second cell stores a plain tensor on a Module (TL101) and waits for
// jupyterlab-lsp's underline in that cell, and only there; then it types the fix
// (nn.Parameter(...) around the tensor, inside the underlined statement, so the old underline
// stays put until torchlint answers the edit) and waits for the underline to go.
//
// Screenshots and the Jupyter log go to $TORCHLINT_E2E_ARTIFACTS (default: the temp folder).
// Jupyter runs in its own session and process group (the language server is its child) and the
// whole group is killed at the end, whatever happens.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const REPO = path.resolve(__dirname, '..', '..');
const CACHE = process.env.TORCHLINT_E2E_CACHE || path.join(os.homedir(), '.cache', 'torchlint-e2e');
const JUPYTER = path.join(CACHE, 'jupyter-venv', 'bin', 'jupyter');
const CHROMIUM = process.env.TORCHLINT_E2E_CHROMIUM || '/usr/bin/chromium';
// The Python that runs this checkout's torchlint (server/ on its path): the project's virtualenv by default.
const TORCHLINT_PYTHON = process.env.TORCHLINT_E2E_TORCHLINT_PYTHON || path.join(REPO, '.venv', 'bin', 'python');
const TIMEOUT = 120000;  // one wait; generous: a busy 2-core machine runs Jupyter, the server and a browser

const BUGGY_LINE = '        self.scale = torch.ones(dim)';
const FIXED_LINE = '        self.scale = nn.Parameter(torch.ones(dim))';
const CELLS = [
  'import torch\nfrom torch import nn',
  ['class ScaledBlock(nn.Module):', '    def __init__(self, dim):', '        super().__init__()', BUGGY_LINE, '',
   '    def forward(self, x):', '        return x * self.scale'].join('\n'),
];

function step(message) {
  console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

function fail(message) {
  throw new Error(message);
}

// -- jupyter lab, in its own process group ---------------------------------------------------
let serverGroup;  // the pid of jupyter lab = its process group id (spawned detached: setsid)

function killServer() {
  if (serverGroup !== undefined) {
    try {
      process.kill(-serverGroup, 'SIGKILL');
    } catch (error) {
      if (error.code !== 'ESRCH') console.error(`could not kill jupyter's group: ${error.message}`);
    }
    serverGroup = undefined;
  }
}
process.on('exit', killServer);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => { killServer(); process.exit(130); });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => { const { port } = probe.address(); probe.close(() => resolve(port)); });
  });
}

function getJson(port, urlPath) {
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 2000 }, (response) => {
      let body = '';
      response.on('data', (chunk) => { body += chunk; });
      response.on('end', () => {
        try { resolve(response.statusCode === 200 ? JSON.parse(body) : null); } catch (error) { resolve(null); }
      });
    });
    request.on('error', () => resolve(null));
    request.on('timeout', () => { request.destroy(); resolve(null); });
  });
}

async function waitUntil(what, check, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  fail(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
}

// -- the temporary Jupyter home: config with the torchlint entry, the notebook ---------------
function prepare(root) {
  const dirs = {};
  for (const name of ['config', 'data', 'runtime', 'home', 'settings', 'workspaces', 'notebooks']) {
    dirs[name] = path.join(root, name);
    fs.mkdirSync(dirs[name], { recursive: true });
  }
  const serverEntry = {
    version: 2,
    display_name: 'torchlint',
    argv: [TORCHLINT_PYTHON, '-m', 'torchlint', 'serve'],
    env: { PYTHONPATH: path.join(REPO, 'server') },
    languages: ['python'],
    mime_types: ['text/python', 'text/x-python', 'text/x-ipython'],
    requires_documents_on_disk: false,
  };
  fs.writeFileSync(path.join(dirs.config, 'jupyter_server_config.json'), JSON.stringify(
    { LanguageServerManager: { autodetect: false, language_servers: { torchlint: serverEntry } } }, null, 2));
  const notebook = {
    nbformat: 4, nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' },
                language_info: { name: 'python', mimetype: 'text/x-python', file_extension: '.py' } },
    cells: CELLS.map((source, index) => ({ cell_type: 'code', id: `cell-${index}`, metadata: {}, execution_count: null,
                                           outputs: [], source })),
  };
  fs.writeFileSync(path.join(dirs.notebooks, 'scaled_block.ipynb'), JSON.stringify(notebook, null, 1));
  const env = { ...process.env, JUPYTER_CONFIG_DIR: dirs.config, JUPYTER_DATA_DIR: dirs.data,
                JUPYTER_RUNTIME_DIR: dirs.runtime, HOME: dirs.home, JUPYTERLAB_SETTINGS_DIR: dirs.settings,
                JUPYTERLAB_WORKSPACES_DIR: dirs.workspaces, IPYTHONDIR: path.join(dirs.home, '.ipython') };
  delete env.PYTHONPATH;  // Jupyter's own environment stays as setup.sh made it; the server gets its own
  delete env.VIRTUAL_ENV;
  return { dirs, env };
}

// -- the notebook in the browser -------------------------------------------------------------
function cell(page, index) {
  return page.locator('.jp-NotebookPanel .jp-Notebook .jp-Cell').nth(index);
}

function underlines(page, index) {
  return cell(page, index).locator('.cm-lintRange');
}

async function session(page, port, artifacts) {
  const opened = Date.now();
  await page.goto(`http://127.0.0.1:${port}/lab/tree/scaled_block.ipynb`, { timeout: TIMEOUT });
  await cell(page, 1).locator('.cm-content').waitFor({ timeout: TIMEOUT });
  step(`the notebook shows (${((Date.now() - opened) / 1000).toFixed(1)} s)`);
  await underlines(page, 1).first().waitFor({ timeout: TIMEOUT }).catch((error) => {
    fail(`no underline in cell 2 within ${TIMEOUT / 1000} s: torchlint's TL101 never showed\n${error.message}`);
  });
  const shown = Date.now();
  const underlined = (await underlines(page, 1).allInnerTexts()).join('');
  const classes = await underlines(page, 1).first().getAttribute('class');
  step(`cell 2 underlined (${((shown - opened) / 1000).toFixed(1)} s after opening): "${underlined}" [${classes}]`);
  if (!underlined.includes('self.scale')) fail(`the underline in cell 2 is on "${underlined}", not on self.scale`);
  if (!classes.includes('cm-lintRange-warning')) fail(`TL101 here is a warning; the underline is ${classes}`);
  const firstCell = await underlines(page, 0).count();
  if (firstCell !== 0) fail(`cell 1 (the imports) has ${firstCell} underline(s); the finding belongs to cell 2`);
  // The tooltip on hover carries torchlint's message.
  await underlines(page, 1).first().hover();
  const tooltip = page.locator('.cm-tooltip-lint, .cm-tooltip-hover').filter({ hasText: 'does not register' });
  await tooltip.first().waitFor({ timeout: TIMEOUT });
  step(`tooltip: "${(await tooltip.first().innerText()).replace(/\s+/g, ' ').slice(0, 120)}"`);
  await page.screenshot({ path: path.join(artifacts, 'diagnostic.png') });

  // The fix, typed inside the underlined statement: the underline maps through the edit and
  // stays until torchlint's answer to the new text replaces it.
  const line = cell(page, 1).locator('.cm-line').nth(3);
  await line.click();
  await page.keyboard.press('End');
  await page.keyboard.type(')');
  for (let i = 0; i < ')'.length + 'torch.ones(dim)'.length; i += 1) await page.keyboard.press('ArrowLeft');
  await page.keyboard.insertText('nn.Parameter(');
  const text = await line.innerText();
  if (text.replace(/\u00a0/g, ' ').trimEnd() !== FIXED_LINE) fail(`the edited line reads "${text}", not "${FIXED_LINE}"`);
  const edited = Date.now();
  await waitUntil('the underline in cell 2 to go after the fix', async () => (await underlines(page, 1).count()) === 0,
    TIMEOUT);
  step(`the underline went ${((Date.now() - edited) / 1000).toFixed(1)} s after the edit`);
  await page.screenshot({ path: path.join(artifacts, 'fixed.png') });
}

function chromium() {
  return require(path.join(CACHE, 'driver', 'node_modules', 'playwright-core')).chromium;
}

async function main() {
  if (!fs.existsSync(JUPYTER)) fail(`no ${JUPYTER}: run tests/e2e_jupyter/setup.sh first`);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'torchlint-e2e-jupyter-'));
  const artifacts = process.env.TORCHLINT_E2E_ARTIFACTS || root;
  fs.mkdirSync(artifacts, { recursive: true });
  const { dirs, env } = prepare(root);
  step(`torchlint serve on ${TORCHLINT_PYTHON}, from ${path.join(REPO, 'server')}`);

  const port = await freePort();
  const log = fs.openSync(path.join(artifacts, 'jupyter.log'), 'w');
  const child = spawn(JUPYTER, ['lab', '--no-browser', '--ip', '127.0.0.1', '--port', String(port), '--allow-root',
    '--IdentityProvider.token=', '--ServerApp.password=', `--ServerApp.root_dir=${dirs.notebooks}`],
  { env, cwd: dirs.notebooks, detached: true, stdio: ['ignore', log, log] });  // detached: setsid, own group
  serverGroup = child.pid;
  let browser;
  try {
    await waitUntil('jupyter lab to answer /api/status', async () => (await getJson(port, '/api/status')) !== null,
      TIMEOUT);
    const status = await getJson(port, '/lsp/status');
    const specs = Object.keys((status && status.specs) || {});
    if (specs.join() !== 'torchlint') fail(`jupyter-lsp's servers are [${specs}], not [torchlint]`);
    step(`jupyter lab is up on port ${port} (process group ${serverGroup}); jupyter-lsp offers [${specs}]`);
    browser = await chromium().launch({
      executablePath: CHROMIUM, headless: true, env,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
             '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 850 } });
    try {
      await session(page, port, artifacts);
    } catch (error) {
      await page.screenshot({ path: path.join(artifacts, 'failure.png') }).catch(() => {});
      const lsp = await getJson(port, '/lsp/status');
      console.error(`jupyter-lsp sessions: ${JSON.stringify(lsp && lsp.sessions)}`);
      throw error;
    }
  } catch (error) {
    console.error(`[e2e] FAIL; screenshots and the Jupyter log in ${artifacts}`);
    throw error;
  } finally {
    if (browser) await browser.close().catch(() => {});
    killServer();
  }
  step(`PASS (screenshots and the Jupyter log in ${artifacts})`);
}

main().then(() => process.exit(0), (error) => {
  console.error(error && error.stack ? error.stack : error);
  killServer();
  process.exit(1);
});
