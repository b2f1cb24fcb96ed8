"""Documents whose lines are the protocol's lines, edited the way the protocol says.

pygls splits a document with ``str.splitlines``, which also breaks on form feeds, ``\\x1c``-
``\\x1e``, ``\\x85`` and U+2028/9. LSP clients (and Python's tokenizer) only break on ``\\n``,
``\\r\\n`` and ``\\r``, so an incremental edit below a form feed would land on the wrong line
and the server's text would silently drift from the editor's.

pygls also drops an edit that starts below the last line and, on the last line, clamps a
character past the end to one before it. Here a character past a line's end clamps to the
line's end (the LSP rule), an end past the document clamps to the document's end, and an
edit that starts past the end (or ends before it starts) is refused: the document is then
*out of sync* (``out_of_sync`` says why) and ignores further incremental edits until the
client sends the whole text again (a full change, or close and reopen).
"""
from __future__ import annotations

import logging
import re
from typing import List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import PositionCodec

log = logging.getLogger("torchlint.lsp")

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_BREAK = re.compile(r"\r\n|\r|\n")


class OutOfRange(ValueError):
    """An edit the document cannot take (it starts past the end, or ends before it starts)."""


def _line_bounds(text: str, last_needed: int) -> List[Tuple[int, int]]:
    """(start offset, end offset without the line break) of lines 0..last_needed (fewer when
    the text has fewer lines); the scan stops at the last line asked for."""
    bounds: List[Tuple[int, int]] = []
    start = 0
    for match in _BREAK.finditer(text):
        bounds.append((start, match.start()))
        start = match.end()
        if len(bounds) > last_needed:
            return bounds
    bounds.append((start, len(text)))
    return bounds


def _offset(text: str, bounds: List[Tuple[int, int]], position: types.Position, codec: PositionCodec) -> int:
    start, end = bounds[position.line]
    units = 0
    for index in range(start, end):
        if units >= position.character:
            return index
        units += codec.client_num_units(text[index])
    return end  # past the line's end: the line's end (LSP)


def apply_edit(text: str, rng: types.Range, new_text: str, codec: PositionCodec) -> str:
    """``text`` with ``rng`` replaced by ``new_text``; raises OutOfRange for an impossible range."""
    start, end = rng.start, rng.end
    if (end.line, end.character) < (start.line, start.character):
        raise OutOfRange("the edit's range ends (%d:%d) before it starts (%d:%d)"
                         % (end.line, end.character, start.line, start.character))
    bounds = _line_bounds(text, end.line)
    if start.line >= len(bounds):
        raise OutOfRange("the edit starts on line %d but the document has %d lines"
                         % (start.line, len(bounds)))
    first = _offset(text, bounds, start, codec)
    if end.line >= len(bounds):
        log.warning("an edit ends on line %d of a %d-line document: taken to the end", end.line, len(bounds))
        last = len(text)
    else:
        last = _offset(text, bounds, end, codec)
    return text[:first] + new_text + text[last:]


class ProtocolLinesDocument(TextDocument):
    out_of_sync: Optional[str] = None  # why the text can no longer be trusted, until a full change

    @property
    def lines(self) -> Sequence[str]:
        return tuple(_LINE.findall(self.source))

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        if self.out_of_sync:
            return  # the base is unknown: applying more edits to it would only drift further
        try:
            self._source = apply_edit(self.source, change.range, change.text, self.position_codec)
        except OutOfRange as err:
            self.out_of_sync = str(err)
            log.error("%s: %s; the document is out of sync until the editor sends it whole", self.uri, err)

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        self._source = change.text
        self.out_of_sync = None


def use_protocol_lines(workspace: Workspace) -> None:
    """Make ``workspace`` create (and so edit) documents with the protocol's line breaks."""

    def create(doc_uri: str, source: Optional[str] = None, version: Optional[int] = None,
               language_id: Optional[str] = None) -> TextDocument:
        return ProtocolLinesDocument(doc_uri, source=source, version=version, language_id=language_id,
                                     sync_kind=workspace._sync_kind, position_codec=workspace.position_codec)

    workspace._create_text_document = create  # type: ignore[method-assign]  # (pygls has no hook for it)
