"""What the server keeps per open document, in one record, and what it knows of its client.

The text and version of a document stay in pygls' workspace, which applies the edits
(``lsp/documents.py``). Everything torchlint derives from them lives in the document's
:class:`DocumentState`: the scheduler's runs and newest result per wave, the incremental
checkers, the diagnostics of the last text that parsed, what the client pulled or was pushed,
the verification's findings and the problems shown about it. Opening a document (a file, a
notebook, a notebook's cell) creates its record and closing it drops that record, so nothing
of a closed document stays behind. Feature modules never see a record: the handlers in
``server.py`` read what a feature needs from it and store what the feature answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, FrozenSet, Hashable, Iterator, List, Optional
from urllib.parse import unquote

from lsprotocol import types
from pygls.capabilities import get_capability

from ..analysis.findings import Finding
from ..incremental import IncrementalChecker
from .scheduler import Runs, Wave

if TYPE_CHECKING:  # notebooks.py imports this module (through publishing.py)
    from .notebooks import JoinedNotebook


@dataclass(frozen=True)
class ClientSupport:
    """What the client said it can do, at ``initialize``."""

    pull: bool = False  # it pulls diagnostics (textDocument/diagnostic): never push to it then
    refresh_support: bool = False  # it can be asked to pull again (workspace/diagnostic/refresh)
    config_support: bool = False  # it answers workspace/configuration
    document_changes: bool = False  # it takes versioned edits (documentChanges)
    inlay_hint_refresh: bool = False  # it can be asked to request inlay hints again
    code_lens_refresh: bool = False  # it can be asked to request code lenses again
    markdown: bool = True  # hovers may be Markdown

    @classmethod
    def of(cls, caps: types.ClientCapabilities) -> "ClientSupport":
        formats = get_capability(caps, "text_document.hover.content_format", None)
        return cls(
            pull=get_capability(caps, "text_document.diagnostic", None) is not None,
            refresh_support=bool(get_capability(caps, "workspace.diagnostics.refresh_support", False)),
            config_support=bool(get_capability(caps, "workspace.configuration", False)),
            document_changes=bool(get_capability(caps, "workspace.workspace_edit.document_changes", False)),
            inlay_hint_refresh=bool(get_capability(caps, "workspace.inlay_hint.refresh_support", False)),
            code_lens_refresh=bool(get_capability(caps, "workspace.code_lens.refresh_support", False)),
            markdown=not formats or types.MarkupKind.Markdown in formats)

    @property
    def verification_apart(self) -> bool:
        """Whether verification findings travel apart from the document's diagnostics: a client
        that pulls but cannot be asked to pull again (Neovim 0.11 has no handler for
        ``workspace/diagnostic/refresh``) would see them only at its next pull, which comes with
        an edit that makes them stale; it gets them pushed on their own instead, beside what it
        pulled (``lsp/verification.py``)."""
        return self.pull and not self.refresh_support


@dataclass(frozen=True)
class Verification:
    """The ``torchlint.verifyModule`` runs' findings, by the class each run found them in (None:
    the file's own), valid for the version they were computed on."""

    version: Optional[int]
    by_class: Dict[Optional[str], List[Finding]]
    pushed_apart: bool = False  # pushed on their own (ClientSupport.verification_apart): an empty push clears them

    @property
    def findings(self) -> List[Finding]:
        found = [finding for findings in self.by_class.values() for finding in findings]
        return sorted(found, key=lambda f: (f.range.start, f.code))

    def after(self, run: Dict[Optional[str], List[Finding]], whole_file: bool, version: Optional[int],
              pushed_apart: bool) -> "Verification":
        """These findings with a later run's: a run of the whole file replaces them all; a run of
        one class (of the same text) replaces that class's and the file's own, keeping the others."""
        kept = {} if whole_file or version != self.version else dict(self.by_class)
        kept.pop(None, None)  # (the file's own are the latest run's: an import that failed may work now)
        kept.update(run)
        return Verification(version, kept, pushed_apart)


@dataclass(eq=False)
class DocumentState:
    """One open document's record."""

    uri: str
    runs: Runs = field(default_factory=Runs)  # the scheduler's: pending analysis, timing, newest result
    checkers: Dict[Wave, IncrementalChecker] = field(default_factory=dict)  # wave -> its checker
    last_good: List[types.Diagnostic] = field(default_factory=list)  # of the last text that parsed
    pulled: Optional[str] = None  # the result id the client pulled last
    verification: Optional[Verification] = None
    # The classes whose last run wanted example inputs (their lens asks for them): unlike the
    # findings, kept across edits, until a run of the class says otherwise.
    needing_inputs: FrozenSet[str] = frozenset()
    problems: Dict[Hashable, str] = field(default_factory=dict)  # kind ("too large"...) -> the message shown
    # A notebook's: its code cells joined, computed once per set of cell texts, and per cell uri
    # the diagnostics pushed last.
    joined: Optional["JoinedNotebook"] = None
    sent: Dict[str, List[types.Diagnostic]] = field(default_factory=dict)

    def checker(self, wave: Wave, path: str) -> IncrementalChecker:
        """The checker of one wave, which keeps what it found between versions."""
        checker = self.checkers.get(wave)
        if checker is None or checker.path != path:
            checker = self.checkers[wave] = IncrementalChecker(path)
        return checker

    def drop_results(self) -> None:
        """Its text can no longer be trusted (out of sync): nothing computed from it stays."""
        self.runs.stop()
        self.runs = Runs()
        self.checkers.clear()
        self.last_good = []


class OpenDocuments:
    """uri -> the record of each open document. Keys are unquoted, as pygls' workspace has them,
    so a uri spelled with or without percent escapes finds the same record."""

    def __init__(self) -> None:
        self._records: Dict[str, DocumentState] = {}

    def open(self, uri: str) -> DocumentState:
        """The document's record, created when it opens (kept if it was open already)."""
        record = self._records.get(unquote(uri))
        if record is None:
            record = self._records[unquote(uri)] = DocumentState(uri)
        return record

    def get(self, uri: str) -> Optional[DocumentState]:
        """The record of an open document; None once it closed. Any thread."""
        return self._records.get(unquote(uri))

    def close(self, uri: str) -> Optional[DocumentState]:
        """Drop the document's record (its pending analysis cancelled); the dropped record, to
        clear what the client was shown from it."""
        record = self._records.pop(unquote(uri), None)
        if record is not None:
            record.runs.stop()
        return record

    def runs(self, uri: str) -> Optional[Runs]:
        """The scheduler's part of an open document's record. Any thread."""
        record = self.get(uri)
        return record.runs if record is not None else None

    def __iter__(self) -> Iterator[DocumentState]:
        return iter(list(self._records.values()))
