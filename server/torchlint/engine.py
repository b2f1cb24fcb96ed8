"""Run the rules over one file: parse, build the context once, check, filter.

This is the whole public surface of the core: source text in, findings out. It sits above
the rules (it runs them) and below everything that reports findings.
"""
from __future__ import annotations

import ast
import logging
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional

from .analysis.context import FileContext
from .analysis.findings import CheckResult, Finding, Severity
from .analysis.inference_seam import Inference
from .analysis.noqa import parse_directives
from . import collection
from .analysis.parsing import parse
from .analysis.source import SourceText
from .rules import ALL_RULES

log = logging.getLogger("torchlint")


@dataclass(frozen=True)
class CheckOptions:
    """Which rules run on a file and at which severity (already resolved for that file)."""

    enabled: Optional[FrozenSet[str]] = None  # None: every rule
    severities: Dict[str, Severity] = field(default_factory=dict)
    # Also report what the rules grade as quiet (no evidence of harm here), as hints.
    show_all: bool = False


DEFAULT_OPTIONS = CheckOptions()


def check_source(text: str, path: str = "<stdin>", options: CheckOptions = DEFAULT_OPTIONS,
                 inference: Optional[Inference] = None) -> CheckResult:
    with collection.paused():
        return _check_source(text, path, options, inference)


def _check_source(text: str, path: str, options: CheckOptions, inference: Optional[Inference]) -> CheckResult:
    tree, error = parse(text, path)
    if tree is None:
        return CheckResult([], error)
    return check_tree(text, path, tree, options, inference)


def check_tree(text: str, path: str, tree: ast.Module, options: CheckOptions = DEFAULT_OPTIONS,
               inference: Optional[Inference] = None, file_attribute_names: Optional[Counter[str]] = None,
               source: Optional[SourceText] = None) -> CheckResult:
    """The rules over an already parsed ``tree`` of ``text``. ``file_attribute_names``: the
    file's attribute-name counts when ``tree`` holds only part of the file (torchlint.incremental);
    ``source``: ``text``'s SourceText when the caller has one already."""
    ctx = FileContext(text, path, tree, inference, show_all=options.show_all,
                      file_attribute_names=file_attribute_names, source=source)
    directives = parse_directives(ctx.source, tree)
    result = CheckResult()
    findings: List[Finding] = []
    for rule in ALL_RULES:
        if options.enabled is not None and rule.code not in options.enabled:
            continue
        try:
            findings.extend(rule.check(ctx))
        except RecursionError:  # code nested deeper than the rule's walk can follow
            log.debug("rule %s reached the recursion limit on %s", rule.code, path)
            result.cut_short.append(rule.code)
        except Exception:  # a bug in one rule must not cost the user the others
            log.error("rule %s failed on %s:\n%s", rule.code, path, traceback.format_exc())
            result.internal_errors.append("%s: %s" % (rule.code, traceback.format_exc(limit=3)))
    if ctx.inference is not None:
        ctx.inference.finish()  # keeps jedi's answers for the next check of this text
    unreachable = ctx.unreachable() if findings else []
    result.unchecked = ctx.unchecked
    ctx.release()
    for finding in findings:
        if directives.suppresses(finding):
            continue
        if unreachable and any(r.start <= finding.range.start <= r.end for r in unreachable):
            continue  # code that never runs makes no finding, whichever rule found it
        severity = options.severities.get(finding.code)
        result.findings.append(finding.with_severity(severity) if severity else finding)
    result.findings.sort(key=lambda f: (f.range.start, f.code))
    return result
