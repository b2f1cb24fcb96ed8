"""The language-server clients most tests use, one server per test module: ``vscode`` (pushes
diagnostics to a client with VS Code's capabilities; it counts the server's requests to refresh
code lenses in ``lens_refreshes``) and ``neovim`` (Neovim 0.11's). A module that needs another
set-up (notebook sync) defines its own fixture of the same name, which takes precedence there."""
import pytest_lsp
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_helpers import CONFIG, NEOVIM, VSCODE, initialize


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def vscode(lsp_client: LanguageClient):
    lsp_client.lens_refreshes = 0

    def lens_refresh(params: None) -> None:
        lsp_client.lens_refreshes += 1

    lsp_client.protocol.fm.features[types.WORKSPACE_CODE_LENS_REFRESH] = lens_refresh
    lsp_client.init_result = await initialize(lsp_client, VSCODE)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def neovim(lsp_client: LanguageClient):
    lsp_client.init_result = await initialize(lsp_client, NEOVIM)
    yield
    await lsp_client.shutdown_session()
