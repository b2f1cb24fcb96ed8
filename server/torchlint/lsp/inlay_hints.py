"""Inlay hints (setting ``inlayHints``, off by default): after each assignment in a Module's
``__init__``, what the attribute is (parameter, buffer, submodule...) in a word, the hover's
status. Files and notebook cells alike (through a view)."""
from __future__ import annotations

from typing import List

from lsprotocol import types

from ..analysis.findings import Range
from ..analysis.registration import Status, init_registrations_in_text
from .hover import plain
from .scheduler import OffLoop
from .views import DocumentView


async def inlay_hints(view: DocumentView, shown: types.Range, markdown: bool, off_loop: OffLoop) -> List[types.InlayHint]:
    """The hints within ``shown`` (the part of the document the client asks about)."""
    if view.result.parse_error is not None:  # a text too large to analyse has one too
        return []
    found = await off_loop(init_registrations_in_text, view.snap.text, view.snap.path or "untitled.py")
    hints = []
    for position, registration in found:
        at = view.lsp_range(Range(position, position))
        if registration.status is Status.UNKNOWN or at is None or not _within(at.start, shown):
            continue
        tooltip = registration.describe(view.line_name)
        hints.append(types.InlayHint(
            position=at.start, label=registration.word, padding_left=True,
            tooltip=types.MarkupContent(kind=types.MarkupKind.Markdown, value=tooltip) if markdown
            else plain(tooltip)))
    return hints


def _within(position: types.Position, rng: types.Range) -> bool:
    return (rng.start.line, rng.start.character) <= (position.line, position.character) <= (
        rng.end.line, rng.end.character)
