"""``torchlint check`` as steps over one :class:`RunState`: the settings, discover the files,
choose the interpreter, plan the jobs, run them, report, and the exit status."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import FrozenSet, Optional, Union, cast

from .. import __version__, collection
from ..analysis.notebook import is_notebook
from ..config import Config, ConfigError, find_config, load_config
from ..engine import CheckOptions
from ..environments import choose_interpreter
from ..exit_codes import EXIT_ERROR
from ..fixing import NotWritten, write_in_place
from ..inference.inference_cache import InferenceCache, default_cache_dir
from ..settings import SettingError, given_flags
from .checking import Checked, Job
from .discovery import discover_files
from .process_state import ProcessState
from .progress import Progress
from .reporting import (error, hints_printed, not_silenced, parse_error_place, report_results, say_errors, say_notes,
                        say_timing)
from .run_state import RunState
from .signals import StopSignals
from .workers import run_jobs


def command_check(args: argparse.Namespace) -> int:
    process = ProcessState()
    try:
        with StopSignals() as signals:
            status = run_check(args, signals, process)
    finally:
        process.close()
    # What the check built (the last trees, jedi's caches) lives until the process ends; the
    # collection at exit would walk all of it again (benchmarks/README.md#tuned-constants).
    collection.freeze()
    return status


def run_check(args: argparse.Namespace, signals: StopSignals, process: ProcessState) -> int:
    run = start_run(args, signals, process, time.perf_counter())
    if isinstance(run, int):
        return run
    stop = discover_files(run)
    if stop is not None:
        return stop
    choose_python(run)
    plan_jobs(run)
    process.show_log(args.verbose)
    check_jobs(run)
    signals.stop_if_received()
    finish_stdin(run)
    say_notes(run)
    if run.cache_dir is not None:
        InferenceCache(Path(run.cache_dir)).trim()
    errors = say_errors(run)
    status = report_results(run)
    say_timing(run)
    return EXIT_ERROR if errors or run.problems else status


def start_run(args: argparse.Namespace, signals: StopSignals, process: ProcessState,
              started: float) -> Union[RunState, int]:
    """The run's settings; the exit status when the flags or the settings are wrong."""
    if not args.paths:  # `--stdin-filename NAME` alone reads standard input, as `-` does
        args.paths = ["-"] if args.stdin_filename is not None else ["."]
    usage = usage_problem(args)
    if usage:
        return error(usage)
    stdin = args.paths == ["-"]
    try:
        config = load_settings(args)
    except ConfigError as err:
        return error(str(err))
    mode = "noqa" if args.add_noqa else "diff" if args.diff else "fix" if args.fix else "check"
    # With `-`, --fix and --add-noqa print the new text on stdout: the report goes to stderr.
    return RunState(args, config, signals, process, mode=mode, stdin=stdin, started=started,
                    report_stream=sys.stderr if stdin and mode in ("fix", "noqa") else sys.stdout)


def usage_problem(args: argparse.Namespace) -> Optional[str]:
    """A combination of flags that cannot work, said as an error (exit 2); None when fine."""
    stdin = "-" in args.paths
    if stdin and len(args.paths) > 1:
        return "`-` reads a file from standard input: give no other path with it"
    if args.stdin_filename is not None and not stdin:
        return "--stdin-filename names the file read from standard input: give `-` (or no path), not %s" % (
            " ".join(args.paths))
    for flag, other in (("add_noqa", "fix"), ("add_noqa", "diff"), ("add_noqa", "statistics"),
                        ("changed_lines_only", "fix"), ("changed_lines_only", "diff")):
        if getattr(args, flag) and getattr(args, other):
            why = " (fixes apply to whole files; --diff-against alone limits them to the changed files)" \
                if flag == "changed_lines_only" else ""
            return "--%s cannot be combined with --%s%s" % (flag.replace("_", "-"), other, why)
    if args.changed_lines_only and args.diff_against is None:
        return "--changed-lines-only needs --diff-against REF (it keeps the findings on lines changed against REF)"
    if args.diff_against is not None and stdin:
        return "--diff-against checks the changed files of a git repository, not standard input"
    return None


def load_settings(args: argparse.Namespace) -> Config:
    """The settings of the run: the project's pyproject.toml, the flags over it."""
    if args.config:
        config = load_config(args.config)
    elif args.paths == ["-"]:  # standard input: the settings of the file it stands for
        config = find_config(os.path.abspath(args.stdin_filename or "."))
    else:
        config = find_config(os.path.commonpath([os.path.abspath(p) for p in args.paths]))
    try:
        flags = given_flags(args, "check")
    except SettingError as err:
        raise ConfigError(str(err)) from None
    return config.over(flags)


def choose_python(run: RunState) -> None:
    """The environment the jedi layer analyses, its cache folder and budget."""
    args, config = run.args, run.config
    settings = config.settings
    run.budget = settings.infer_budget or None  # 0: no limit
    run.cache_dir = str(default_cache_dir()) if settings.inference_cache and not args.no_infer else None
    if not args.no_infer:
        choice = choose_interpreter(explicit=settings.interpreter, configured=config.python, config_file=config.path,
                                    trust_workspace=settings.trust_workspace_interpreter)
        for warning in choice.warnings:
            run.process.say(warning)
        run.python = choice.interpreter
    if args.verbose:
        print("torchlint %s: config %s, root %s, %d files" % (
            __version__, config.path or "(defaults)", config.root, len(run.files)), file=sys.stderr)
    python = run.python
    if python is not None and (args.verbose or not (python.is_own or python.venv)):
        # Start an interpreter that must run here, once: one that hangs or fails is reported
        # once and replaced before the workers start, not once per worker.
        layer = run.process.inference_for(Job(path="", display="", options=CheckOptions(), root=str(config.root),
                                              python=python, cache_dir=run.cache_dir, infer_budget=run.budget))
        run.python = layer.interpreter if layer is not None else python
        if args.verbose:
            print("torchlint: %s" % (layer.describe() if layer else "type inference is off (jedi unusable)"),
                  file=sys.stderr)


def plan_jobs(run: RunState) -> None:
    args, config = run.args, run.config
    run.jobs = [Job(path=str(path), display="-" if run.stdin and not args.stdin_filename else run.shown(path),
                    options=config.options_for(path), mode=run.mode, unsafe_fixes=args.unsafe_fixes,
                    infer=not args.no_infer, python=run.python, root=str(config.root), cache_dir=run.cache_dir,
                    infer_budget=run.budget, max_file_size=config.settings.max_file_size,
                    lines=_lines_of(run, path), data=run.stdin_data, noqa_hints=hints_printed(config))
                for path in run.files]


def _lines_of(run: RunState, path: Path) -> Optional[FrozenSet[int]]:
    # A notebook's git lines are JSON: a changed notebook is reported whole.
    if run.changes is None or not run.args.changed_lines_only or is_notebook(str(path)):
        return None
    return run.changes.lines_of(path)


def check_jobs(run: RunState) -> None:
    """Run the jobs: write each file's fixes as it comes, keep its report."""
    progress = Progress(len(run.jobs), sys.stderr) if Progress.wanted(sys.stderr, run.args.quiet) else None
    run.progress = progress
    with progress or contextlib.nullcontext(), \
            contextlib.closing(run_jobs(run.jobs, run.process, run.args.verbose, progress)) as results:
        for job, checked in zip(run.jobs, results):
            run.signals.stop_if_received()
            take(run, job, checked)


def take(run: RunState, job: Job, checked: Checked) -> None:
    """One file's outcome: its fixes written, what to say kept for the report."""
    if checked.unreadable:
        problem: Optional[str] = "%s: %s" % (job.display, checked.unreadable)
        run.not_read += 1
    elif run.mode == "noqa" and checked.report.error is not None:
        problem = "%s: does not parse (%s); no noqa directive added (fix it, then run again)" % (
            job.display, parse_error_place(checked.report))
    elif run.stdin:
        problem, run.stdin_result = None, checked  # the new text goes to stdout at the end
    else:
        problem = write_fixes(checked, job.display, run.mode)
    if problem:
        with _cleared(run):
            error(problem)
        run.problems += 1
    if not checked.unreadable:
        run.reports.append(checked.report)
    if checked.noqa_added:
        run.noqa_files, run.noqa_added = run.noqa_files + 1, run.noqa_added + checked.noqa_added
    run.noqa_left.extend(not_silenced(job.display, checked))
    run.notes.extend("%s: %s" % (job.display, note) for note in checked.notes)
    run.cache_dropped += checked.cache_events.dropped
    for unwritten in checked.cache_events.unwritten:
        with _cleared(run):
            run.process.say("%s; the findings are the same, later runs are slower" % unwritten)


def _cleared(run: RunState) -> "contextlib.AbstractContextManager[None]":
    """A message said during the run gets a line of its own (the progress line is wiped first)."""
    return run.progress.cleared() if run.progress else contextlib.nullcontext()


def write_fixes(checked: Checked, display: str, mode: str = "fix") -> Optional[str]:
    """Write a --fix (or --add-noqa) result in the main process; the error message when it was
    not written. The report then says what was not written."""
    if checked.fixed_data is None:
        return None
    outcome = "not fixed" if mode == "fix" else "no noqa directive added"
    try:
        write_in_place(checked.report.path, checked.fixed_data, checked.original)
        return None
    except NotWritten as err:
        message, why = err.says(outcome, "--fix" if mode == "fix" else "--add-noqa"), err.reason
    except OSError as err:
        why = str(err.strerror or err)
        message = "%s: %s" % (outcome, why)
    report = checked.report
    if mode == "noqa":
        checked.noqa_added = 0
        return "%s: %s" % (display, message)
    report.unwritten, report.unwritten_why = report.fixed, why
    report.findings, report.fixed = checked.unfixed_findings, 0
    if checked.unfixed_cells is not None:  # a notebook: positions of the cells as they still are
        report.cells = checked.unfixed_cells
    return "%s: %s" % (display, message)


def finish_stdin(run: RunState) -> None:
    """`-` with --fix or --add-noqa: like ruff, the text, fixed or not, on stdout."""
    if run.stdin and run.mode in ("fix", "noqa"):
        fixed = run.stdin_result.fixed_data if run.stdin_result is not None else None
        sys.stdout.buffer.write(cast(bytes, run.stdin_data) if fixed is None else fixed)  # (read: stdin)
        sys.stdout.flush()
