"""Diagnostics out: what a document shows for a result, and how it reaches the client.

They go out one way per client, decided at ``initialize`` (:class:`~.state.ClientSupport`):
pulled (``textDocument/diagnostic``) when the client can pull, pushed
(``publishDiagnostics``) otherwise. A pull's result id is the document's version and a digest
of the diagnostics, so it changes whenever any layer's findings do; when a later wave or a
verification changes what a client last pulled, the server asks it to pull again
(``workspace/diagnostic/refresh``). A pull is answered with the newest wave in for the
document's version, the first as soon as it is, never held for the jedi wave (Neovim 0.11
showed a fixed finding for the 12 s a busy machine took over it); a client that cannot be asked
to pull again sees the later wave at its next pull, under another result id.

Nothing here keeps state: the handlers pass what the document's record holds (the last
diagnostics of a text that parsed, the result id pulled last, what was pushed to each cell)
and store what comes back.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from ..analysis.findings import CheckResult, Finding
from .convert import Converter
from .scheduler import Snapshot
from .state import ClientSupport

SERVER_CANCELLED = -32802  # LSP's ServerCancelled: the client may ask again

Diagnostics = List[types.Diagnostic]


class DiagnosticsOut(Protocol):
    """Where diagnostics go (the server sends them)."""

    def push(self, uri: str, version: Optional[int], diagnostics: Diagnostics) -> None:
        """``textDocument/publishDiagnostics``."""

    def ask_to_pull(self) -> None:
        """``workspace/diagnostic/refresh``."""


@dataclass(frozen=True)
class Shown:
    """What a document (or a notebook's cell) shows for one result."""

    items: Diagnostics
    # When its text parsed: the findings' own diagnostics, kept to show unchanged while a later
    # text does not parse (mid-typing). None: this text did not parse.
    parsed: Optional[Diagnostics]


def file_diagnostics(snap: Snapshot, result: CheckResult, converter: Converter, last_good: Diagnostics,
                     verified: Sequence[Finding]) -> Shown:
    """A file's diagnostics for a current result, with the verification's findings that join them.
    While the text does not parse, the last findings of the text that did stay up, unchanged."""
    if result.parse_error is not None:
        return Shown(list(last_good), None)
    diagnostics = converter.lsp_diagnostics(result.findings, snap.uri)
    if result.unchecked:
        diagnostics.append(converter.unchecked_diagnostic(result.unchecked))
    if result.cut_short:
        diagnostics.append(converter.cut_short_diagnostic(result.cut_short))
    items = diagnostics + converter.lsp_diagnostics(verified, snap.uri) if verified else diagnostics
    return Shown(items, diagnostics)


def result_id(snap: Snapshot, diagnostics: Diagnostics) -> str:
    """A pull result id that changes whenever the diagnostics do (whichever layer changed them)."""
    digest = hashlib.blake2b(repr(diagnostics).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return "%s-%s" % (snap.version, digest)


# A pull's answer: the diagnostics, or that the client holds them already.
PullReport = Union[types.RelatedFullDocumentDiagnosticReport, types.UnchangedDocumentDiagnosticReport]


def pull_report(snap: Snapshot, items: Diagnostics, previous_result_id: Optional[str]) -> Tuple[PullReport, str]:
    """A ``textDocument/diagnostic`` answer, and its result id (what the client now holds):
    "unchanged" when it already held these diagnostics."""
    identifier = result_id(snap, items)
    if previous_result_id == identifier:
        return types.UnchangedDocumentDiagnosticReport(result_id=identifier), identifier
    return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=identifier), identifier


def changed_while_analysed(what: str) -> JsonRpcException:
    """The error for a pull whose document changed under it: the client asks again."""
    return JsonRpcException("the %s changed while it was analysed" % what, SERVER_CANCELLED,
                            {"retriggerRequest": True})


def ask_to_pull(client: ClientSupport, pulled: Optional[str], current: Optional[str], out: DiagnosticsOut) -> None:
    """Ask the client to pull again if what it pulled last (``pulled``) is not ``current``."""
    if client.refresh_support and pulled is not None and pulled != current:
        out.ask_to_pull()


def publish_file(snap: Snapshot, client: ClientSupport, later_wave: bool, pulled: Optional[str],
                 diagnostics: Callable[[], Diagnostics], out: DiagnosticsOut) -> None:
    """A wave is in for a file's current text: push it, or have a pull client pull it
    (``diagnostics`` is asked only when they go somewhere)."""
    if not client.pull:
        out.push(snap.uri, snap.version, diagnostics())
    elif later_wave and pulled is not None:  # the client pulls the first wave itself
        ask_to_pull(client, pulled, result_id(snap, diagnostics()), out)


def publish_cells(snap: Snapshot, client: ClientSupport, later_wave: bool, per_cell: Mapping[str, Tuple[Optional[int], Diagnostics]],
                  pulled: Mapping[str, Optional[str]], sent: Mapping[str, Diagnostics],
                  out: DiagnosticsOut) -> Dict[str, Diagnostics]:
    """A wave is in for a notebook's current cells (cell uri -> (version, diagnostics)): push each
    cell's diagnostics that changed since ``sent`` (what each cell was pushed last), or have a
    pull client pull again (``pulled``: per cell, the result id it pulled last). Answers what
    each cell now holds."""
    if client.pull:
        if later_wave and client.refresh_support and any(
                pulled.get(cell_uri) is not None and pulled[cell_uri] != result_id(snap, items)
                for cell_uri, (_, items) in per_cell.items()):
            out.ask_to_pull()
        return dict(sent)
    now = dict(sent)
    for cell_uri in [uri for uri in now if uri not in per_cell]:  # cells deleted (or no longer code) since
        del now[cell_uri]
        out.push(cell_uri, None, [])
    for cell_uri, (version, items) in per_cell.items():
        if now.get(cell_uri) != items:
            now[cell_uri] = items
            out.push(cell_uri, version, items)
    return now
