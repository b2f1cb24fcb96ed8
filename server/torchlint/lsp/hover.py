"""Hover: on a flagged range, the finding's card (what its diagnostic does not say: the rule, what
the attribute is to torch, the fixes and whether each is safe, the rule's page); elsewhere on
``self.<name>`` in a Module class, what that attribute is (parameter, buffer, submodule,
container, plain tensor...) and where it was registered. Files and notebook cells alike (through a view)."""
from __future__ import annotations

import re
from typing import Optional, Sequence

from lsprotocol import types

from ..analysis.findings import Finding
from ..analysis.registration import registration_in_text
from .convert import hover_card, rule_label
from .scheduler import OffLoop
from .views import DocumentView

_MARKUP = re.compile(r"\*\*|`")


def plain(text: str) -> str:
    """Markdown's bold and code marks dropped, for a client that shows plain text."""
    return _MARKUP.sub("", text)


async def hover(view: DocumentView, position: types.Position, verified: Sequence[Finding], markdown: bool,
                off_loop: OffLoop) -> Optional[types.Hover]:
    """``verified``: the verification's current findings of a file (they belong to files, not cells);
    ``markdown``: whether the client reads Markdown."""
    at = view.core_position(position)
    findings = list(view.result.findings) + list(verified)
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    hits = [f for f in findings if f.range.start <= at <= f.range.end and view.lsp_range(f.range) is not None]
    if hits:
        # One card: the innermost finding's; any other finding here gets a line.
        hits.sort(key=lambda f: (f.range.end.line - f.range.start.line, f.range.end.column - f.range.start.column))
        first = hits[0]
        # What the attribute the finding is about is to torch: under the cursor, else at the finding.
        found = await off_loop(registration_in_text, view.snap.text, view.snap.path or "untitled.py", at,
                               first.range.start)
        attribute = found[1].describe(view.line_name) if found is not None else None
        if attribute is not None and not markdown:
            attribute = plain(attribute)
        card = hover_card(view.relabel(first), markdown, attribute)
        for other in hits[1:]:  # their sentences are diagnostics of their own
            card += "\n\nAlso here: " + rule_label(other.code)
        return types.Hover(contents=types.MarkupContent(kind=kind, value=card), range=view.lsp_range(first.range))
    if view.result.parse_error is not None:  # a text too large to analyse has one too
        return None
    # Indexing the file's classes is a parse away (usually cached): never on the event loop.
    found = await off_loop(registration_in_text, view.snap.text, view.snap.path or "untitled.py", at)
    if found is None:
        return None
    rng, registration = found
    text = registration.describe(view.line_name)
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text if markdown else plain(text)),
                       range=view.lsp_range(rng))

