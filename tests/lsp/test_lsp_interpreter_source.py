"""The server names the editor's interpreter as the editor does (``interpreterSource``): VS Code
picks the interpreter itself (its status bar says `python3, from the default`), and the server's
log in the same output channel said "the torchlint interpreter setting" for it."""
from __future__ import annotations

import sys

import pytest

from lsp_helpers import HELPER_MADE, new_uri, open_document, serving, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="function")


def jedi_lines(client):
    return [m.message for m in client.log_messages if "jedi inference with" in m.message
            or "no torch importable by" in m.message]


@pytest.mark.parametrize("source, said", [("the default", "(the default; "),
                                          (None, "(the torchlint interpreter setting; ")])
async def test_the_jedi_layer_names_where_the_interpreter_came_from(tmp_path, source, said):
    options = {"interpreter": sys.executable}
    if source is not None:
        options["interpreterSource"] = source
    async with serving(tmp_path, options=options) as client:
        open_document(client, new_uri(tmp_path), HELPER_MADE)
        await wait_for(lambda: jedi_lines(client), timeout=120, what="the jedi layer's log line")
        (line,) = jedi_lines(client)
        assert "%s %s" % (sys.executable, said) in line, line
