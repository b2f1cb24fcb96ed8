"""The server keeps the jedi layer's answers on disk, as `torchlint check` does: a restarted
server finds them in the cache folder and answers the jedi wave from them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from lsp_helpers import (HELPER_MADE, SERVER_COMMAND, SERVER_ENV, VSCODE, codes, initialize, open_document,
                         replace_text, wait_for)

pytestmark = pytest.mark.asyncio(loop_scope="function")


def entries(cache_dir: Path):
    return sorted(cache_dir.rglob("*.json"))


async def jedi_wave(cache_dir: Path, uri: str) -> types.PublishDiagnosticsParams:
    """Start a server on ``cache_dir``, open the document, return the jedi wave's publish, stop."""
    config = ClientServerConfig(server_command=SERVER_COMMAND,
                                server_env=dict(SERVER_ENV, TORCHLINT_CACHE_DIR=str(cache_dir)))
    client = await config.start()
    try:
        await initialize(client, VSCODE)
        open_document(client, uri, HELPER_MADE)

        def refined():
            return next((p for p in client.publishes if p.uri == uri and codes(p.diagnostics)), None)
        await wait_for(lambda: refined() is not None, timeout=240, what="the jedi wave")
        await client.shutdown_session()
        return refined()
    finally:
        await client.stop()


def summary(published: types.PublishDiagnosticsParams):
    return [(d.code, d.range.start.line, d.range.start.character, d.message) for d in published.diagnostics]


async def test_a_restarted_server_answers_from_the_disk_cache(tmp_path):
    cache_dir = tmp_path / "cache"
    uri = (tmp_path / "scaled.py").as_uri()

    first = await jedi_wave(cache_dir, uri)
    assert first.version == 1 and codes(first.diagnostics) == ["TL101"]
    stored = entries(cache_dir)
    assert stored, "the first server wrote no answers to %s" % cache_dir

    # Reading an entry marks it recently used (its modification time): age them all, so that
    # the second server's reading shows.
    for entry in stored:
        os.utime(entry, (1_000_000_000, 1_000_000_000))
    second = await jedi_wave(cache_dir, uri)
    assert summary(second) == summary(first)
    assert any(entry.stat().st_mtime > 1_000_000_000 for entry in entries(cache_dir)), \
        "the second server did not read the cached answers"


async def test_a_cache_that_cannot_be_written_costs_only_time(tmp_path):
    """Both caches under a file, not a folder: nothing can be written there. jedi's question
    failed with parso's error before, and the finding was lost. Said once in the log (at the
    check after the one that met it)."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    uri = (tmp_path / "scaled.py").as_uri()
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=dict(
        SERVER_ENV, TORCHLINT_CACHE_DIR=str(blocked), XDG_CACHE_HOME=str(blocked)))
    client = await config.start()
    try:
        await initialize(client, VSCODE)
        open_document(client, uri, HELPER_MADE)

        def said():
            return [m.message for m in client.log_messages if "not kept on disk" in m.message]
        await wait_for(lambda: any(p.uri == uri and codes(p.diagnostics) for p in client.publishes),
                       timeout=240, what="the jedi wave")
        assert [codes(p.diagnostics) for p in client.publishes if p.uri == uri][-1] == ["TL101"]
        for version in (2, 3):
            replace_text(client, uri, HELPER_MADE + "\n" * (version - 2), HELPER_MADE + "\n" * (version - 1), version)
            await wait_for(lambda: any(p.version == version and codes(p.diagnostics) for p in client.publishes),
                           timeout=240, what="the jedi wave of version %d" % version)
        assert said() and len(said()) == len(set(said())), [m.message for m in client.log_messages]
        await client.shutdown_session()
    finally:
        await client.stop()
