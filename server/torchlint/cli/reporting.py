"""The last steps of a run: the notes and errors on stderr, the report (findings, a diff, the
noqa summary) on stdout or --output-file, and the exit status."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence, TextIO, Tuple, cast

from ..analysis.findings import ParseError, Severity
from ..config import Config
from ..exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from ..output import FileReport, OutputOptions, cell_position, render
from ..output import json_format
from ..output.text import render_statistics, unchecked_notes
from .checking import Checked
from .run_state import RunState


def error(message: str) -> int:
    print("torchlint: error: %s" % message, file=sys.stderr)
    return EXIT_ERROR


def say_notes(run: RunState) -> None:
    """The notes of the files checked (the budget, classes left unchecked), unless -q."""
    if run.args.quiet:
        return
    for note in run.notes + unchecked_notes(run.reports, OutputOptions(cwd=run.cwd), run.args.verbose):
        print("torchlint: note: %s" % note, file=sys.stderr)


def say_errors(run: RunState) -> bool:
    """torchlint's own errors (internal errors, checks cut short); whether there were any."""
    internal = [error for report in run.reports for error in report.internal_errors]
    for message in internal:
        print("torchlint: internal error: %s" % message.rstrip(), file=sys.stderr)
    cut_short = [report for report in run.reports if report.cut_short]
    for report in cut_short:  # (said even with -q: findings were lost, and the exit status says so)
        print("torchlint: error: %s: %s could not check this file: its code is nested deeper than Python's "
              "recursion limit lets the rule follow (a 1,000-deep expression); its findings there are missing"
              % (run.shown(report.path), ", ".join(report.cut_short)), file=sys.stderr)
    return bool(internal or cut_short)


def report_results(run: RunState) -> int:
    """The report of the mode; the exit status it gives (a failed write of it: one more problem)."""
    args = run.args
    if run.mode == "noqa":
        written, status = _noqa_summary(run), EXIT_FINDINGS if run.noqa_left and not args.exit_zero else EXIT_CLEAN
    elif run.mode == "diff":
        written, changed = _diffs(run)
        # A preview of --fix, which fixes whatever it can (hints too): 1 when it would change a file.
        status = EXIT_FINDINGS if changed and not args.exit_zero else EXIT_CLEAN
    else:
        written = _findings(run)
        status = EXIT_FINDINGS if failed(run.reports, run.config) and not args.exit_zero else EXIT_CLEAN
    if written:
        error(written)
        run.problems += 1
    return status


def _noqa_summary(run: RunState) -> Optional[str]:
    for message in run.noqa_left:
        print("torchlint: warning: %s" % message, file=sys.stderr)
    if not run.args.quiet:
        left, added, files = len(run.noqa_left), run.noqa_added, run.noqa_files
        print("Added %d noqa directive%s to %d file%s.%s" % (
            added, "" if added == 1 else "s", files, "" if files == 1 else "s",
            " %d finding%s could not be silenced (above)." % (left, "" if left == 1 else "s")
            if left else ""), file=sys.stderr)
    return None


def _diffs(run: RunState) -> Tuple[Optional[str], int]:
    """(the error writing them, the number of files that would change)."""
    diffs = "".join(report.diff for report in run.reports if report.diff)
    written = emit(diffs if not diffs or diffs.endswith("\n") else diffs + "\n", run.args.output_file,
                   run.report_stream)
    count = sum(1 for report in run.reports if report.diff)
    if not run.args.quiet:
        fixable = sum(report.fixed for report in run.reports)
        print("Would fix %d finding%s in %d file%s." % (
            fixable, "" if fixable == 1 else "s", count, "" if count == 1 else "s"), file=sys.stderr)
    return written, count


def _findings(run: RunState) -> Optional[str]:
    args = run.args
    options = OutputOptions(unsafe_fixes=args.unsafe_fixes, fix_mode=run.mode == "fix", quiet=args.quiet,
                            cwd=run.cwd, show_hints=hints_printed(run.config), files_not_checked=run.not_read)
    if args.statistics:
        statistics = json_format.render_statistics if args.format == "json" else render_statistics
        return emit(statistics(run.reports, options), args.output_file, run.report_stream)
    return emit(render(run.reports, args.format, options), args.output_file, run.report_stream)


def say_timing(run: RunState) -> None:
    """-v: the cache entries dropped, the files checked and how long it took."""
    if not run.args.verbose:
        return
    dropped = run.cache_dropped
    if dropped:
        print("torchlint: %d cache entr%s failed their checks (damaged or altered): deleted, computed again"
              % (dropped, "y" if dropped == 1 else "ies"), file=sys.stderr)
    print("torchlint: checked %d files in %.2fs" % (len(run.files), time.perf_counter() - run.started),
          file=sys.stderr)


def emit(text: str, output_file: Optional[str], stream: TextIO) -> Optional[str]:
    """Write the report to ``--output-file`` (its folders made as needed) or ``stream``; the error
    message when the file cannot be written."""
    if output_file is None:
        stream.write(text)
        stream.flush()  # before the summary line on stderr: the two never interleave
        return None
    try:
        target = Path(output_file)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as err:
        return "--output-file %s: cannot write: %s" % (output_file, err.strerror or err)
    return None


def hints_printed(config: Config) -> bool:
    """Whether the text output prints hints: asked for (``show-hints``), asked for the quiet
    findings (``show-all``: they are hints), or hints fail the run (``fail-on = "hint"``: what
    makes a run fail is always printed)."""
    return config.show_hints or config.show_all or config.fail_on is Severity.HINT


def failed(reports: Sequence[FileReport], config: Config) -> bool:
    """A file that does not parse, or a finding at or above ``fail-on``."""
    return any(report.error is not None or any(config.fails_on(f.severity) for f in report.findings)
               for report in reports)


def parse_error_place(report: FileReport) -> str:
    """``line 3: SyntaxError: ...`` (``cell 2, line 3: ...`` in a notebook)."""
    error = cast(ParseError, report.error)  # (a report of a file that does not parse)
    cell, pos = cell_position(report, error.position)
    return "%sline %d: %s" % ("cell %d, " % cell if cell is not None else "", pos.line, error.message)


def not_silenced(display: str, checked: Checked) -> List[str]:
    """--add-noqa: what to say about each finding no directive silences."""
    messages = []
    for finding in checked.noqa_left:
        cell, pos = cell_position(checked.report, finding.range.start)
        messages.append("%s:%s%d:%d: %s not silenced: no comment can end its first or last line (inside a "
                        "string, or a backslash continuation); silence it with per-file-ignores or a file-level "
                        "`# torchlint: noqa: %s`" % (display, "cell %d:" % cell if cell is not None else "",
                                                      pos.line, pos.column + 1, finding.code, finding.code))
    return messages
