"""ruff-style text: ``path:line:col: TL101 [warning] [*] message``, then a summary line. ``[*]``
marks a finding --fix fixes (ruff's mark), ``[-]`` one only --unsafe-fixes would.

Hints are printed only with ``show_hints``; otherwise the summary counts them."""
from __future__ import annotations

from collections import Counter
from typing import Dict, List

from ..analysis.findings import Finding, Position, Severity
from ..rules import RULES_BY_CODE
from . import FileReport, OutputOptions, cell_position, display_path


def shown(finding: Finding, options: OutputOptions) -> bool:
    """Whether the text output prints this finding (every finding but hints, unless asked)."""
    return options.show_hints or finding.severity is not Severity.HINT


def render(reports: List[FileReport], options: OutputOptions) -> str:
    rows = []  # (path, position, where, text): parse errors sit among findings by position
    for report in reports:
        path = display_path(report.path, options.cwd)
        if report.error is not None:
            pos = report.error.position
            rows.append((path, pos, _where(report, pos), report.error.message))
        for finding in report.findings:
            if not shown(finding, options):
                continue
            start = finding.range.start
            marker = {"[*]": "[*] ", "[-]": "[-] "}.get(_fix_mark(finding, options), "")
            rows.append((path, start, _where(report, start), "%s [%s] %s%s" % (
                finding.code, finding.severity.value, marker, finding.message)))
    rows.sort()
    lines = ["%s:%s: %s" % (path, where, text) for path, _, where, text in rows]
    if not options.quiet:
        if lines:
            lines.append("")
        lines.append(summary(reports, options))
    return "\n".join(lines) + "\n" if lines else ""


def _fix_mark(finding: Finding, options: OutputOptions) -> str:
    """``[*]`` when --fix (with the options given) fixes it, ``[-]`` when only --unsafe-fixes would."""
    if finding.fix_to_apply(options.unsafe_fixes):
        return "[*]"
    return "[-]" if finding.fix_to_apply(True) else ""


def _where(report: FileReport, pos: Position) -> str:
    """``line:col``, or ``cell N:line:col`` in a notebook (as ruff writes it)."""
    cell, pos = cell_position(report, pos)
    return ("cell %d:" % cell if cell is not None else "") + "%d:%d" % (pos.line, pos.column + 1)


def _plural(count: int, noun: str = "finding") -> str:
    return "%d %s%s" % (count, noun, "" if count == 1 else "s")


def _hidden_hints(count: int) -> str:
    return "%s hidden (--show-hints shows them)" % _plural(count, "hint")


def _not_checked_notes(cut_short: int, not_read: int) -> List[str]:
    """What the summary says of the files not checked, or not whole (their errors are above)."""
    notes = []
    if cut_short:
        notes.append("%s not checked whole: nested too deep for a rule (see above)" % _plural(cut_short, "file"))
    if not_read:
        notes.append("%s not checked (see above)" % _plural(not_read, "file"))
    return notes


def summary(reports: List[FileReport], options: OutputOptions) -> str:
    """``Found N findings (...)``, counting what was printed (and what --fix fixed, hints
    included); hints that were not printed are counted after it."""
    findings = [f for r in reports for f in r.findings if shown(f, options)]
    hidden = sum(1 for r in reports for f in r.findings if not shown(f, options))
    remaining = len(findings) + sum(1 for r in reports if r.error is not None)
    fixed = sum(r.fixed for r in reports) if options.fix_mode else 0
    fixable = sum(1 for f in findings if f.fix_to_apply(options.unsafe_fixes))
    unsafe = sum(1 for f in findings if _fix_mark(f, options) == "[-]")
    unwritten = sum(r.unwritten for r in reports) if options.fix_mode else 0
    cut_short = sum(1 for r in reports if r.cut_short)
    if remaining == 0 and fixed == 0 and not unwritten and not cut_short:
        if options.files_not_checked:  # (the run exits 2: the summary must not say all passed)
            return "All checks passed in the files checked; %s%s." % (
                "; ".join(_not_checked_notes(0, options.files_not_checked)),
                "; %s" % _hidden_hints(hidden) if hidden else "")
        return "All checks passed!" + (" %s." % _hidden_hints(hidden) if hidden else "")
    notes = _not_checked_notes(cut_short, options.files_not_checked)
    if fixed:
        notes.append("%d fixed, %d remaining" % (fixed, remaining))
    if unwritten:
        whys = {r.unwritten_why for r in reports if r.unwritten}
        notes.append("%d fix%s not written: %s" % (unwritten, "" if unwritten == 1 else "es",
                                                   whys.pop() if len(whys) == 1 else "see the errors above"))
    if fixable and not options.fix_mode:
        notes.append("%d fixable with --fix" % fixable)
    if unsafe:
        notes.append(("%d more fixable with --unsafe-fixes" if fixable or fixed
                      else "%d fixable with --fix --unsafe-fixes") % unsafe + ", marked [-]")
    return "Found %s%s%s." % (_plural(remaining + fixed), " (%s)" % "; ".join(notes) if notes else "",
                              "; %s" % _hidden_hints(hidden) if hidden else "")


def unchecked_notes(reports: List[FileReport], options: OutputOptions, each: bool) -> List[str]:
    """What no rule checked, for stderr: the classes whose Module-ness could not be read, counted
    by base and reason, and with ``each`` (-v) one line per class."""
    counts = Counter((c.base, c.reason) for r in reports for c in r.unchecked)
    if not counts:
        return []
    why = "; ".join("base `%s`: %s (%d)" % (base, reason, count) for (base, reason), count in counts.most_common(3))
    more = len(counts) - 3
    total = sum(counts.values())
    lines = ["%d class%s not checked, whether %s nn.Modules could not be read: %s%s; install the package that "
             "defines %s into the analysed environment, or choose that environment with --python%s"
             % (total, "" if total == 1 else "es", "it is an" if total == 1 else "they are", why,
                " and %d more" % more if more > 0 else "", "it" if len(counts) == 1 else "them",
                "" if each else " (-v lists the classes)")]
    for report in reports if each else ():
        path = display_path(report.path, options.cwd)
        lines.extend("%s:%s: class %s not checked: base `%s`: %s" % (
            path, _where(report, c.position), c.name, c.base, c.reason) for c in report.unchecked)
    return lines


def render_statistics(reports: List[FileReport], options: OutputOptions) -> str:
    """One line per rule with findings: count, code, fixability marker ([*], or [-] for unsafe only), rule name. Hints count
    per rule only with ``show_hints``; otherwise one line counts them all."""
    findings = [f for r in reports for f in r.findings if shown(f, options)]
    counts = Counter(f.code for f in findings)
    marks: Dict[str, str] = {}  # per rule: [*] when --fix fixes one of its findings, else [-] when --unsafe-fixes would
    for finding in findings:
        if marks.get(finding.code) != "[*]":
            marks[finding.code] = _fix_mark(finding, options) or marks.get(finding.code, "")
    errors = sum(1 for r in reports if r.error is not None)
    hidden = sum(1 for r in reports for f in r.findings if not shown(f, options))
    rows = [(count, code, marks[code] or "   ", getattr(RULES_BY_CODE.get(code), "name", ""))
            for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if errors:
        rows.append((errors, "", "   ", "syntax-error"))
    if hidden:
        rows.append((hidden, "", "   ", "hints (--show-hints counts them per rule)"))
    width = max((len(str(r[0])) for r in rows), default=1)
    code_width = max((len(r[1]) for r in rows), default=5)
    return "".join("%*d\t%-*s\t%s %s\n" % (width, count, code_width, code, marker, name)
                   for count, code, marker, name in rows)
