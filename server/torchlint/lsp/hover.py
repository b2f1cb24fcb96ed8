"""Hover: on a flagged range, the finding's card; elsewhere on ``self.<name>`` in a Module class,
what that attribute is (parameter, buffer, submodule, container, plain tensor...) and where it
was registered. Inlay hints (setting ``inlayHints``, off by default): the same status in a word
after each assignment in ``__init__``. Files and notebook cells alike (through a view)."""
from __future__ import annotations

import re
from typing import List, Optional

from lsprotocol import types

from ..analysis.findings import Range
from ..analysis.registration import Status, init_registrations_in_text, registration_in_text
from .convert import hover_card
from .notebooks import view_of

_MARKUP = re.compile(r"\*\*|`")


async def hover(server, params: types.HoverParams) -> Optional[types.Hover]:
    view = await view_of(server, params.text_document.uri)
    if view is None:
        return None
    at = view.core_position(params.position)
    findings = list(view.result.findings)
    if view.uri == view.snap.uri:  # verification results belong to files
        findings += server.verified.get(view.snap.uri, view.snap.version)
    kind = types.MarkupKind.Markdown if server.markdown else types.MarkupKind.PlainText
    hits = [f for f in findings if f.range.start <= at <= f.range.end and view.lsp_range(f.range) is not None]
    if hits:
        # One card: the innermost finding's; any other finding here gets a line.
        hits.sort(key=lambda f: (f.range.end.line - f.range.start.line, f.range.end.column - f.range.start.column))
        card = hover_card(view.relabel(hits[0]), server.markdown)
        others = ["%s %s" % (f.code, view.relabel(f).message) for f in hits[1:]]
        if others:
            card += "\n\n" + "\n\n".join(("Also here: " + line) for line in others)
        return types.Hover(contents=types.MarkupContent(kind=kind, value=card), range=view.lsp_range(hits[0].range))
    if server.too_large(view.snap.text) or view.result.parse_error is not None:
        return None
    # Indexing the file's classes is a parse away (usually cached): never on the event loop.
    found = await server.scheduler.run(registration_in_text, view.snap.text, view.snap.path or "untitled.py", at)
    if found is None:
        return None
    rng, registration = found
    text = registration.describe(view.line_name)
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text if server.markdown else _MARKUP.sub("", text)),
                       range=view.lsp_range(rng))


async def inlay_hints(server, params: types.InlayHintParams) -> List[types.InlayHint]:
    if not server.resolver.settings.inlay_hints:
        return []
    view = await view_of(server, params.text_document.uri)
    if view is None or server.too_large(view.snap.text) or view.result.parse_error is not None:
        return []
    found = await server.scheduler.run(init_registrations_in_text, view.snap.text, view.snap.path or "untitled.py")
    hints = []
    for position, registration in found:
        at = view.lsp_range(Range(position, position))
        if registration.status is Status.UNKNOWN or at is None or not _within(at.start, params.range):
            continue
        tooltip = registration.describe(view.line_name)
        hints.append(types.InlayHint(
            position=at.start, label=registration.word, padding_left=True,
            tooltip=types.MarkupContent(kind=types.MarkupKind.Markdown, value=tooltip) if server.markdown
            else _MARKUP.sub("", tooltip)))
    return hints


def refresh_inlay_hints(server) -> None:
    """Settings changed: clients that can be told to ask again are."""
    if server.inlay_hint_refresh:
        server.workspace_inlay_hint_refresh(None)


def _within(position: types.Position, rng: types.Range) -> bool:
    return (rng.start.line, rng.start.character) <= (position.line, position.character) <= (
        rng.end.line, rng.end.character)
