"""The language-server clients most tests use, one server per test module: ``vscode`` (pushes
diagnostics to a client with VS Code's capabilities) and ``neovim`` (Neovim 0.11's). A module
that needs another set-up (notebook sync, a lens refresh handler) defines its own fixture of
the same name, which takes precedence in that module."""
import pytest_lsp
from pygls.lsp.client import LanguageClient

from lsp_helpers import CONFIG, NEOVIM, VSCODE, initialize


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def vscode(lsp_client: LanguageClient):
    lsp_client.init_result = await initialize(lsp_client, VSCODE)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def neovim(lsp_client: LanguageClient):
    lsp_client.init_result = await initialize(lsp_client, NEOVIM)
    yield
    await lsp_client.shutdown_session()
