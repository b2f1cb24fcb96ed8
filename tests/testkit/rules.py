"""Helpers for the tests of one rule's findings and fixes (exact texts, real torch runs)."""
from __future__ import annotations

import textwrap

from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


def check(text, path="example.py", **kwargs):
    result = check_source(text, path, **kwargs)
    assert result.parse_error is None and not result.internal_errors, result
    return result


def findings(text, code):
    return [f for f in check(textwrap.dedent(text)).findings if f.code == code]


def only(text, code):
    found = findings(text, code)
    assert len(found) == 1, found
    return found[0]


def quiet(text, code):
    assert findings(text, code) == []


def fixed(text, fix):
    return apply_edits(textwrap.dedent(text), fix.edits)


def by_title(finding, start):
    matches = [f for f in finding.fixes if f.title.startswith(start)]
    assert len(matches) == 1, [f.title for f in finding.fixes]
    return matches[0]


def preferred(finding):
    (fix,) = [f for f in finding.fixes if f.preferred]
    return fix


def run(text):
    """Execute a snippet with the real torch and return its globals."""
    namespace = {"__name__": "snippet"}
    exec(compile(textwrap.dedent(text), "snippet.py", "exec"), namespace)
    return namespace
