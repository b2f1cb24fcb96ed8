"""Documents whose lines are the protocol's lines.

pygls splits a document with ``str.splitlines``, which also breaks on form feeds, ``\\x1c``-
``\\x1e``, ``\\x85`` and U+2028/9. LSP clients (and Python's tokenizer) only break on ``\\n``,
``\\r\\n`` and ``\\r``, so an incremental edit below a form feed would land on the wrong line
and the server's text would silently drift from the editor's.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from pygls.workspace import TextDocument, Workspace

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class ProtocolLinesDocument(TextDocument):
    @property
    def lines(self) -> Sequence[str]:
        return tuple(_LINE.findall(self.source))


def use_protocol_lines(workspace: Workspace) -> None:
    """Make ``workspace`` create (and so edit) documents with the protocol's line breaks."""

    def create(doc_uri: str, source: Optional[str] = None, version: Optional[int] = None,
               language_id: Optional[str] = None) -> TextDocument:
        return ProtocolLinesDocument(doc_uri, source=source, version=version, language_id=language_id,
                                     sync_kind=workspace._sync_kind, position_codec=workspace.position_codec)

    workspace._create_text_document = create
