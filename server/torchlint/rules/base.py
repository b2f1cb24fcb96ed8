"""What every rule is: a stable code, a name, a one-line summary, a default
severity, its doc page, and a ``check`` that turns a FileContext into findings."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Iterable

from ..analysis.findings import Finding, Severity

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"


def shorten(text: str, limit: int = 50) -> str:
    """Source text as a message quotes it: on one line, elided past ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    # False where no edit is right in general (the rule's page says why): its findings come bare.
    offers_fixes: ClassVar[bool] = True

    def check(self, ctx) -> Iterable[Finding]:  # ctx: analysis.context.FileContext
        raise NotImplementedError

    @classmethod
    def doc_path(cls) -> Path:
        return DOCS_DIR / ("%s.md" % cls.code)

    @classmethod
    def doc(cls) -> str:
        return cls.doc_path().read_text(encoding="utf-8")

    @classmethod
    def doc_url(cls) -> str:
        return cls.doc_path().as_uri()
