"""What every rule is: a stable code, a name, a one-line summary, a default
severity, its doc page, and a ``find`` that turns a FileContext into findings."""
from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path
from typing import Callable, ClassVar, Iterator, List, Optional, Tuple

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Severity

# A clean-up after a file's fixes: (the text before them, the text after) -> the text to keep.
Cleanup = Callable[[str, str], str]

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"
# The [project.urls] entry that says where the TLxxx.md pages are published (a folder URL).
# None is declared in this repository, so links are file:// URIs of the installed pages.
DOCS_URL_LABEL = "Rule docs"


@functools.lru_cache(maxsize=None)
def published_docs_url() -> Optional[str]:
    """The https folder of the rule pages, from the installed package's [project.urls]."""
    try:
        entries: List[str] = metadata.metadata("torchlint").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:  # run from a source tree or the VS Code bundle
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() == DOCS_URL_LABEL.lower() and url.strip().startswith("https://"):
            return url.strip().rstrip("/")
    return None


def shorten(text: str, limit: int = 50) -> str:
    """Source text as a message quotes it: on one line, elided past ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    # How a rule that grades its findings (``ctx.finding(..., severity=...)``) grades them, in a
    # few words for the README's rule table (the page's Severity section says it in full); empty
    # where every finding has ``severity``.
    grading: ClassVar[str] = ""
    # False where no edit is right in general (the rule's page says why): its findings come bare.
    offers_fixes: ClassVar[bool] = True
    # What a finding on module-level script code may rest on besides the statement it is on and
    # the names that statement reads: True, any other statement of the module's script code (an
    # optimizer built before it, a use after it), so the editor's incremental check re-checks
    # all of that code when any of it is edited. False only for a rule whose findings never
    # rest on statement order at module level (torchlint.incremental; tests/test_incremental.py
    # fuzzes the difference).
    reads_script_flow: ClassVar[bool] = True
    # What its fixes may leave for a clean-up once all of a file's are in (rules/cleanups.py):
    # blocks to join, imports left unused. The fix applier runs those of the rules it applied.
    cleanups: ClassVar[Tuple[Cleanup, ...]] = ()

    def check(self, ctx: FileContext) -> List[Finding]:
        """This rule's findings in the file: ``find``'s, whose ``ctx.finding`` calls take the
        rule's code and default severity."""
        with ctx.running(self):
            return list(self.find(ctx))

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        """What each rule defines: its findings, made with ``ctx.finding`` and ``ctx.fix``."""
        raise NotImplementedError

    @classmethod
    def doc_path(cls) -> Path:
        return page_path(cls.code)

    @classmethod
    def doc(cls) -> str:
        return cls.doc_path().read_text(encoding="utf-8")

    @classmethod
    def doc_url(cls) -> str:
        return page_url(cls.code)


def page_path(code: str) -> Path:
    """The installed page of a code (a rule's, or a verification check's)."""
    return DOCS_DIR / ("%s.md" % code)


def page_url(code: str) -> str:
    """The page of a code (a rule's, or a verification check's): published (``[project.urls]
    "Rule docs"``), else the installed file."""
    published = published_docs_url()
    return "%s/%s.md" % (published, code) if published else page_path(code).as_uri()
