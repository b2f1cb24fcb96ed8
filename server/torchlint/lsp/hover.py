"""Hover: on a flagged range, the finding's card; elsewhere on ``self.<name>`` in a Module class,
what that attribute is (parameter, buffer, submodule, container, plain tensor...) and where it
was registered. Files and notebook cells alike (through a view)."""
from __future__ import annotations

import re
from typing import Optional

from lsprotocol import types

from ..analysis.registration import registration_in_text
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
        card = hover_card(hits[0], server.markdown)
        others = ["%s %s" % (f.code, f.message) for f in hits[1:]]
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
