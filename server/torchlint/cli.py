"""The ``torchlint`` command: ``check`` files (and fix them), print a ``rule``'s doc.

Exit codes: 0 nothing found at or above ``--fail-on`` (default: warning), 1 such findings
(or files that do not parse), 2 usage, configuration or internal errors.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import io
import logging
import os
import signal
import sys
import threading
import time
import tokenize
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, TextIO, Tuple

from . import __version__
from .engine import CheckOptions, check_source
from .exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from .analysis.environments import Interpreter, choose_interpreter, own_interpreter
from .analysis.findings import Finding, ParseError, Position, Severity
from .analysis.inference_cache import InferenceCache, default_cache_dir
from .analysis.notebook import (CellMap, CellsChanged, CodeCell, NotebookError, is_notebook, join_cells,
                                read_notebook, split_cells, with_sources)
from .config import Config, ConfigError, find_config, load_config
from .files import discover, read_regular_file
from .fixing import NotWritten, fix_text, write_in_place
from .output import FORMATS, FileReport, OutputOptions, display_path, render
from .output.text import render_statistics
from .rules import ALL_RULES
from .rules.base import DOCS_DIR
from .settings import DEFAULT_SETTINGS, SEVERITIES
from .verify import cli_command as verify_command
from .verify.report import VERIFY_CODES

PARALLEL_MIN_FILES = 16
# Seconds of jedi per file; past it the rest of the file is names only. One default for the
# command line and the editor (inferBudget).
DEFAULT_INFER_BUDGET = DEFAULT_SETTINGS.infer_budget
PROGRESS_AFTER = 2.0  # seconds: shorter runs show no progress line


# -- reading files -------------------------------------------------------------------------------

def decode_source(data: bytes) -> Tuple[Optional[str], str, Optional[ParseError]]:
    """(text, encoding, error): UTF-8 unless a PEP 263 cookie or a BOM says otherwise.
    Newlines are kept as they are in the file."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError) as err:
        return None, "", ParseError("DecodeError: %s" % (err.msg if isinstance(err, SyntaxError) else err),
                                    Position(1, 0))
    try:
        return data.decode(encoding), encoding, None
    except UnicodeDecodeError as err:
        before = data[: err.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1)
        return None, encoding, ParseError("DecodeError: not valid %s: %s" % (encoding, err.reason),
                                          Position(line, column))
    except LookupError as err:
        return None, encoding, ParseError("DecodeError: %s" % err, Position(1, 0))


# -- checking one file (runs in worker processes: plain data in, plain data out) -----------------

@dataclass(frozen=True)
class Job:
    path: str
    display: str  # how diffs name the file
    options: CheckOptions
    mode: str = "check"  # "check", "fix" (write the fixes) or "diff" (show them)
    unsafe_fixes: bool = False
    infer: bool = True  # False: --no-infer
    python: Optional[Interpreter] = None  # the environment the jedi layer analyses (None: the default choice)
    root: str = "."  # the project root: where jedi looks for the project's own modules
    cache_dir: Optional[str] = None  # where jedi's answers are kept between runs (None: --no-cache)
    infer_budget: Optional[float] = DEFAULT_INFER_BUDGET  # seconds of jedi per file (None: no limit)


# One jedi layer per process, project and interpreter, shared by every file that process checks:
# jedi's first trip into torch costs seconds, later ones milliseconds. Keyed by pid too: a forked
# worker must never talk to its parent's jedi subprocess.
_INFERENCE = {}
_SAID = set()  # warnings this process already printed


def _say(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        print("torchlint: warning: %s" % message, file=sys.stderr, flush=True)


def inference_for(job: Job):
    """The jedi layer for this job, or None (--no-infer, or jedi unusable: names alone then).
    After an interpreter timed out: torchlint's own interpreter, then names alone."""
    if not job.infer:
        return None
    key = (os.getpid(), job.root, job.python, job.cache_dir, job.infer_budget)
    if key not in _INFERENCE:
        _INFERENCE[key] = _new_layer(job, job.python)
    layer = _INFERENCE[key]
    if layer is not None and layer.failure is not None:
        own = layer.interpreter.is_own
        _INFERENCE[key] = layer = None if own else _new_layer(job, own_interpreter())
    return layer


def close_layers() -> None:
    """End this process's jedi interpreters before it forks workers: a child must never write
    to a pipe its parent (or a sibling) reads. A later question here starts them again."""
    for (pid, *_), layer in _INFERENCE.items():
        if pid == os.getpid() and layer is not None:
            layer.close()


def _new_layer(job: Job, interpreter: Optional[Interpreter]):
    try:
        from .analysis.inference import JediInference
        from .analysis.inference_cache import InferenceCache
        own = interpreter is None or interpreter.is_own
        layer = JediInference(job.root, interpreter, on_timeout=lambda message: _say(
            "%s; %s" % (message, "type inference is off for the rest of this run" if own
                        else "the next files are checked with torchlint's own Python")),
            cache=InferenceCache(Path(job.cache_dir)) if job.cache_dir else None, budget=job.infer_budget,
            # A CLI process ends after its files: jedi's warm-up state lives until then, and the
            # files, read from disk, do not change while their questions are asked.
            freeze_after_warm=True, share_states=True)
    except Exception as err:  # no jedi, or an environment it cannot start: fall back, never fail
        logging.getLogger("torchlint").warning("type inference is off: %s", err)
        return None
    for warning in layer.warnings:
        _say(warning)
    return layer


@dataclass
class Checked:
    """One job's outcome. Workers only compute: with --fix the new content comes back here and
    the main process writes it, so stopping the main process stops every write."""

    report: FileReport
    unreadable: str = ""  # why the file could not be read (an error, exit 2)
    original: bytes = b""  # --fix: the content the fixes were computed from
    fixed_data: Optional[bytes] = None  # --fix: the content to write (None: nothing to write)
    unfixed_findings: List[Finding] = field(default_factory=list)  # what to report if the write fails
    notes: List[str] = field(default_factory=list)  # for the user, e.g. inference stopped by the budget
    unfixed_cells: Optional[CellMap] = None  # a notebook's cells before --fix (for unfixed_findings)


# A worker runs with the cyclic garbage collector off. A check frees nearly all it built by
# reference counting (FileContext.release breaks its cycles); most of what outlives it is jedi's
# model of torch, kept to the end of the run, which every collection would walk again (a tenth of
# the default mode's time on the benchmark corpus). So after each file what it left is put out of
# the collector's reach (gc.freeze: no walk), and the few cycles it left as garbage are collected
# once the worker's peak memory has grown by COLLECT_AFTER_GROWTH since the last collection (every
# COLLECT_EVERY files where the peak cannot be read).
COLLECT_AFTER_GROWTH = 256 * 2 ** 20
COLLECT_EVERY = 500
_COLLECTED = {"worker": False, "files": 0, "peak": 0}


def _peak_memory() -> Optional[int]:
    """This process's peak resident memory in bytes, or None where it cannot be read."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _collect_now() -> None:
    """After each file a worker checked (see COLLECT_AFTER_GROWTH)."""
    if not _COLLECTED["worker"]:
        return  # the main process: Python's own schedule
    _COLLECTED["files"] += 1
    peak = _peak_memory()
    if peak is None and _COLLECTED["files"] % COLLECT_EVERY == 0 \
            or peak is not None and peak - _COLLECTED["peak"] >= COLLECT_AFTER_GROWTH:
        gc.unfreeze()
        gc.collect()
        _COLLECTED["peak"] = _peak_memory() or 0
    gc.freeze()


def check_file(job: Job) -> Checked:
    checked = _check_file(job)
    _collect_now()
    return checked


def _check_file(job: Job) -> Checked:
    checked = Checked(FileReport(job.path))
    report = checked.report
    try:
        data = read_regular_file(job.path)
    except OSError as err:
        checked.unreadable = "cannot read: %s" % (err.strerror or err)
        return checked
    if is_notebook(job.path):
        return check_notebook(job, data, checked)
    text, encoding, report.error = decode_source(data)
    if text is None:
        return checked
    try:
        inference = inference_for(job)
        result = check_source(text, job.path, job.options, inference)
        if job.mode != "check" and result.parse_error is None:
            unfixed = list(result.findings)
            outcome = fix_text(text, job.path, job.options, job.unsafe_fixes, inference, result)
            result, report.fixed = outcome.result, outcome.fixed
            report.internal_errors.extend(outcome.errors)
            if outcome.text != text:
                if job.mode == "diff":
                    report.diff = unified_diff(text, outcome.text, job.display)
                else:
                    checked.original, checked.fixed_data = data, outcome.text.encode(encoding)
                    checked.unfixed_findings = unfixed
        if inference is not None:
            checked.notes = sorted(set(inference.take_notes().values()))
    except Exception:  # a torchlint bug: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return checked
    report.findings = list(result.findings)
    report.error = result.parse_error
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)
    return checked


def check_notebook(job: Job, data: bytes, checked: Checked) -> Checked:
    """check_file for a .ipynb: its code cells are checked as one text (analysis.notebook);
    --fix changes only the fixed cells' sources in the JSON, written like any other file."""
    report = checked.report
    try:
        notebook = read_notebook(data)
    except NotebookError as err:
        report.error = ParseError(str(err), Position(1, 0))
        return checked
    if notebook.language != "python":
        return checked  # an R or Julia notebook: nothing for torchlint
    joined = join_cells(notebook.code_cells, job.path)
    report.cells = joined.cells
    try:
        inference = inference_for(job)
        result = check_source(joined.text, job.path, job.options, inference)
        if job.mode != "check" and result.parse_error is None:
            unfixed = list(result.findings)
            outcome = fix_text(joined.text, job.path, job.options, job.unsafe_fixes, inference, result)
            report.internal_errors.extend(outcome.errors)
            try:
                sources = split_cells(joined, outcome.text) if outcome.text != joined.text else {}
                fixed_json = with_sources(notebook, sources)
            except CellsChanged as err:
                checked.notes.append("fixes not applied (%s); fix it by hand" % err)
                sources = {}
            if sources:
                cells = [CodeCell(c.number, sources.get(c.number, c.source)) for c in notebook.code_cells]
                rejoined = join_cells(cells, job.path)
                result, report.fixed, report.cells = outcome.result, outcome.fixed, rejoined.cells
                if rejoined.text != outcome.text:  # the positions must be those of the cells written
                    result = check_source(rejoined.text, job.path, job.options, inference)
                if job.mode == "diff":
                    before = {c.number: c.source for c in notebook.code_cells}
                    report.diff = "".join(unified_diff(before[number], sources[number], "%s:cell %d" % (
                        job.display, number)) for number in sorted(sources))
                else:
                    checked.original, checked.fixed_data = data, fixed_json.encode("utf-8")
                    checked.unfixed_findings = unfixed
                    checked.unfixed_cells = joined.cells
        if inference is not None:
            checked.notes.extend(sorted(set(inference.take_notes().values())))
    except Exception:  # a torchlint bug: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return checked
    report.findings = [report.cells.relabel(finding) for finding in result.findings]
    report.error = result.parse_error or (joined.errors[0] if joined.errors else None)
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)
    return checked


def write_fixes(checked: Checked, display: str) -> Optional[str]:
    """Write a --fix result (in the main process); the error message when it was not written."""
    if checked.fixed_data is None:
        return None
    try:
        write_in_place(checked.report.path, checked.fixed_data, checked.original)
        return None
    except (NotWritten, OSError) as err:
        message = str(err) if isinstance(err, NotWritten) else "not fixed: %s" % (err.strerror or err)
    checked.report.findings, checked.report.fixed = checked.unfixed_findings, 0
    if checked.unfixed_cells is not None:  # a notebook: positions of the cells as they still are
        checked.report.cells = checked.unfixed_cells
    return "%s: %s" % (display, message)


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=name, tofile=name)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
                   for line in lines)


_log_handler: Optional[logging.Handler] = None


def configure_logging(verbose: bool) -> None:
    """The core logs rule crashes; the CLI reports them itself, so show the log only with --verbose
    (a handler, even a null one, keeps Python's last-resort handler from printing it)."""
    global _log_handler
    logger = logging.getLogger("torchlint")
    if _log_handler is not None:
        logger.removeHandler(_log_handler)
    _log_handler = logging.StreamHandler() if verbose else logging.NullHandler()
    logger.addHandler(_log_handler)


def run_jobs(jobs: Sequence[Job], verbose: bool = False, progress: Optional["Progress"] = None) -> Iterator[Checked]:
    """Check many files in worker processes, few in this one; results in the jobs' order, as they
    come. Close the iterator (``contextlib.closing``) to stop early: the workers are killed.
    ``progress`` is told of each file as soon as it is done, whatever its place in the order."""
    cpus = os.cpu_count() or 1
    done = 0
    if len(jobs) >= PARALLEL_MIN_FILES and cpus > 1:
        pool = None
        finished = False
        try:
            close_layers()  # nothing of jedi's may cross the fork
            pool = ProcessPoolExecutor(max_workers=min(cpus, 32), initializer=start_worker,
                                       initargs=(verbose, os.getpid()))
            # One file per task, all queued at once: a worker takes the next file the moment it is
            # free, so one slow file never leaves the others idle. Largest first: a big file
            # started last would keep one worker busy while the others have nothing left. Not
            # pool.map: on an interrupt it cancels what is pending, which the pool's own thread
            # then trips over when the workers are killed.
            futures: List[Future] = [None] * len(jobs)
            for index in sorted(range(len(jobs)), key=lambda i: -_size(jobs[i].path)):
                future = pool.submit(check_file, jobs[index])
                if progress is not None:
                    future.add_done_callback(progress.file_done)
                futures[index] = future
            for future in futures:
                checked = future.result()
                done += 1
                yield checked
            finished = True
        except (OSError, BrokenProcessPool):  # no process support here: check the rest serially
            pass
        finally:
            if pool is not None:
                if finished:
                    pool.shutdown(wait=True)
                else:
                    stop_pool(pool)
    for job in jobs[done:]:
        checked = check_file(job)
        if progress is not None:
            progress.file_done()
        yield checked


class Progress:
    """``torchlint: 120/471 files, 3.4 s`` on one line of a terminal's stderr, redrawn a few times a
    second once a run has taken ``PROGRESS_AFTER`` seconds, and wiped at the end. Only for a
    terminal outside CI (``CI`` unset); -q turns it off."""

    def __init__(self, total: int, stream: TextIO, started: Optional[float] = None, interval: float = 0.25):
        self.total = total
        self.stream = stream
        self.started = time.monotonic() if started is None else started
        self.interval = interval
        self.done = 0
        self._drawn = False
        self._lock = threading.Lock()  # one writer at a time: the drawing thread or a message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="torchlint-progress", daemon=True)

    @staticmethod
    def wanted(stream: TextIO, quiet: bool, environ=None) -> bool:
        environ = os.environ if environ is None else environ
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            return False
        return tty and not quiet and not environ.get("CI")

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False

    @contextlib.contextmanager
    def cleared(self):
        """Print a message during the run: the line is wiped first and drawn again later."""
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            yield

    def file_done(self, _future=None) -> None:
        self.done += 1  # one writer at a time: the pool's result thread, or the main thread

    def line(self) -> str:
        done = min(self.done, self.total)
        return "torchlint: %d/%d files, %.1f s" % (done, self.total, time.monotonic() - self.started)

    def _run(self) -> None:
        if self._stop.wait(max(0.0, PROGRESS_AFTER - (time.monotonic() - self.started))):
            return
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                self._write("\r" + self.line() + "\x1b[K")
                self._drawn = True
            if self._stop.wait(self.interval):
                return

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the run goes on without it
            self._stop.set()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # reported when its worker reads it


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Kill the workers now rather than wait for the files they are on."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    for worker in workers:
        with contextlib.suppress(Exception):
            worker.kill()
    pool.shutdown(wait=False)
    if manager is not None:
        manager.join(timeout=10)  # it marks the unfinished work as failed, then ends


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def start_worker(verbose: bool, main_pid: int) -> None:
    """Pool initializer: log like the main process, leave Ctrl-C to it, and die with it. Its
    garbage collector runs only when _collect_now says so."""
    configure_logging(verbose)
    _COLLECTED["worker"], _COLLECTED["peak"] = True, _peak_memory() or 0
    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process stops the pool itself
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent went before the line above took effect
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="torchlint-parent-watch",
                     daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    """Where PR_SET_PDEATHSIG is unavailable: look for the parent every half second."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


# -- the commands --------------------------------------------------------------------------------

def _codes(values: Optional[List[str]], flag: str) -> Optional[List[str]]:
    """Comma lists from repeated flags (`--select TL101,TL102 --select TL2`); a flag given no
    code at all (`--select ""`) is an error rather than "no rules"."""
    if values is None:
        return None
    codes = []
    for value in values:
        given = [code.strip() for code in value.split(",") if code.strip()]
        if not given:
            raise ConfigError("%s: no rule code in %r (give codes or prefixes, e.g. %s TL1,TL301)"
                              % (flag, value, flag))
        codes.extend(given)
    return codes


def _error(message: str) -> int:
    print("torchlint: error: %s" % message, file=sys.stderr)
    return EXIT_ERROR


def load_settings(args) -> Config:
    if args.config:
        config = load_config(args.config)
    else:
        config = find_config(os.path.commonpath([os.path.abspath(p) for p in args.paths]))
    return config.with_overrides(select=_codes(args.select, "--select"),
                                 extend_select=_codes(args.extend_select, "--extend-select") or (),
                                 ignore=_codes(args.ignore, "--ignore") or (), label="--%s",
                                 show_all=True if args.show_all else None, fail_on=args.fail_on,
                                 show_hints=True if args.show_hints else None)


def hints_printed(config: Config) -> bool:
    """Whether the text output prints hints: asked for (``show-hints``), asked for the quiet
    findings (``show-all``: they are hints), or hints fail the run (``fail-on = "hint"``: what
    makes a run fail is always printed)."""
    return config.show_hints or config.show_all or config.fail_on is Severity.HINT


def failed(reports: Sequence[FileReport], config: Config) -> bool:
    """A file that does not parse, or a finding at or above ``fail-on``."""
    return any(report.error is not None or any(config.fails_on(f.severity) for f in report.findings)
               for report in reports)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanup runs as for Ctrl-C. Not an Exception:
    no ``except Exception`` (a rule's guard, a file's) may turn it into an internal error."""


_SIGNALLED: List[int] = []  # the stopping signals received during this run


def _stop_on(signum, frame):
    _SIGNALLED.append(signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def stop_if_signalled() -> None:
    """Raise again a stopping signal whose exception Python swallowed: one that landed in a
    ``__del__`` or a garbage-collector callback is printed as "ignored" and lost. Called before
    anything is written and between files, so a run signalled to stop never goes on."""
    if _SIGNALLED:
        raise Terminated() if _SIGNALLED[0] == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def _signals_stop_the_run():
    """Within the block SIGTERM raises Terminated (by default the process just ends, skipping
    cleanup) and SIGINT raises KeyboardInterrupt, each also recorded for stop_if_signalled. A
    SIGINT that this process was started ignoring (a background job) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(signum)
        if handler is None or signum == signal.SIGINT and handler is not signal.default_int_handler:
            continue
        previous[signum] = signal.signal(signum, _stop_on)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _SIGNALLED.clear()


def command_check(args) -> int:
    with _signals_stop_the_run():
        status = _check(args)
    # What the check built (the last trees, jedi's caches) lives until the process ends; the
    # collection at exit would walk all of it again (8 s of 17 for a 200,000-line file).
    gc.freeze()
    return status


def _check(args) -> int:
    started = time.perf_counter()
    try:
        config = load_settings(args)
    except ConfigError as err:
        return _error(str(err))
    cwd = os.getcwd()
    found = discover([Path(p) for p in args.paths], config.root, config.exclude_patterns,
                     force_exclude=args.force_exclude)
    files = found.files
    for path in found.excluded_by_default if args.verbose else ():
        print("torchlint: note: skipped %s: a default exclude, and not a Python package (`exclude = [\"!%s\"]` "
              "checks it)" % (display_path(str(path), cwd), path.name), file=sys.stderr)
    for path, why in found.skipped:
        if not args.quiet:
            print("torchlint: note: skipped %s: %s" % (display_path(str(path), cwd), why), file=sys.stderr)
    if found.missing or found.errors:
        for path in found.missing:
            _error("%s: no such file or directory" % display_path(str(path), cwd))
        for path, why in found.errors:
            _error("%s: %s" % (display_path(str(path), cwd), why))
        if found.missing or not files:
            return EXIT_ERROR
    problems = len(found.errors)  # unreadable folders: reported, the rest is still checked, exit 2
    if not files and not args.quiet:
        print("torchlint: warning: no Python files found under %s" % " ".join(args.paths), file=sys.stderr)
    python = None
    budget = None if args.infer_budget == 0 else args.infer_budget
    cache_dir = None if args.no_infer or args.no_cache else str(default_cache_dir())
    if not args.no_infer:
        choice = choose_interpreter(explicit=args.python, configured=config.python, config_file=config.path,
                                    trust_workspace=args.trust_workspace)
        for warning in choice.warnings:
            _say(warning)
        python = choice.interpreter
    if args.verbose:
        print("torchlint %s: config %s, root %s, %d files" % (
            __version__, config.path or "(defaults)", config.root, len(files)), file=sys.stderr)
    if python is not None and (args.verbose or not (python.is_own or python.venv)):
        # Start an interpreter that must run here, once: one that hangs or fails is reported
        # once and replaced before the workers start, not once per worker.
        layer = inference_for(Job("", "", CheckOptions(), root=str(config.root), python=python,
                                  cache_dir=cache_dir, infer_budget=budget))
        python = layer.interpreter if layer is not None else python
        if args.verbose:
            print("torchlint: %s" % (layer.describe() if layer else "type inference is off (jedi unusable)"),
                  file=sys.stderr)

    mode = "diff" if args.diff else "fix" if args.fix else "check"
    jobs = [Job(str(path), display_path(str(path), cwd), config.options_for(path), mode, args.unsafe_fixes,
                not args.no_infer, python, str(config.root), cache_dir, budget) for path in files]
    configure_logging(args.verbose)
    reports = []
    notes: List[str] = []  # said after the progress line is gone
    progress = Progress(len(jobs), sys.stderr) if Progress.wanted(sys.stderr, args.quiet) else None
    with progress or contextlib.nullcontext(), contextlib.closing(run_jobs(jobs, args.verbose, progress)) as results:
        for job, checked in zip(jobs, results):
            stop_if_signalled()
            problem = "%s: %s" % (job.display, checked.unreadable) if checked.unreadable \
                else write_fixes(checked, job.display)
            if problem:
                with progress.cleared() if progress else contextlib.nullcontext():
                    _error(problem)
                problems += 1
            if not checked.unreadable:
                reports.append(checked.report)
            notes.extend("%s: %s" % (job.display, note) for note in checked.notes)
    stop_if_signalled()
    for note in notes if not args.quiet else ():
        print("torchlint: note: %s" % note, file=sys.stderr)
    if cache_dir is not None:
        InferenceCache(Path(cache_dir)).trim()

    internal = [error for report in reports for error in report.internal_errors]
    for error in internal:
        print("torchlint: internal error: %s" % error.rstrip(), file=sys.stderr)
    options = OutputOptions(unsafe_fixes=args.unsafe_fixes, fix_mode=mode == "fix", quiet=args.quiet, cwd=cwd,
                            show_hints=hints_printed(config))
    if mode == "diff":
        diffs = [report.diff for report in reports if report.diff]
        sys.stdout.write("".join(diffs))
        if not args.quiet:
            fixable = sum(report.fixed for report in reports)
            print("Would fix %d finding%s in %d file%s." % (
                fixable, "" if fixable == 1 else "s", len(diffs), "" if len(diffs) == 1 else "s"), file=sys.stderr)
        # A preview of --fix, which fixes whatever it can (hints too): 1 when it would change a file.
        status = EXIT_FINDINGS if diffs and not args.exit_zero else EXIT_CLEAN
    else:
        if args.statistics:
            sys.stdout.write(render_statistics(reports, options))
        else:
            sys.stdout.write(render(reports, args.format, options))
        status = EXIT_FINDINGS if failed(reports, config) and not args.exit_zero else EXIT_CLEAN
    if args.verbose:
        print("torchlint: checked %d files in %.2fs" % (len(files), time.perf_counter() - started), file=sys.stderr)
    return EXIT_ERROR if internal or problems else status


def command_rule(args) -> int:
    codes = [(rule.code, rule.name, rule.summary) for rule in ALL_RULES] + [
        (code, name, summary) for code, (name, summary) in VERIFY_CODES.items()]
    if args.all:
        width = max(len(name) for _, name, _ in codes)
        for code, name, summary in codes:
            print("%s  %-*s  %s" % (code, width, name, summary))
        return EXIT_CLEAN
    if not args.code:
        return _error("give a rule code (torchlint rule TL101) or --all")
    found = [entry for entry in codes if entry[0] == args.code.upper()]
    if not found:
        return _error("unknown rule %r (torchlint rule --all lists them)" % args.code)
    ((code, name, summary),) = found
    try:
        doc = (DOCS_DIR / ("%s.md" % code)).read_text(encoding="utf-8")
    except OSError:
        doc = "# %s %s\n\n%s\n" % (code, name, summary)
    sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
    return EXIT_CLEAN


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError("not a number of seconds (0 or more): %r" % value)
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchlint", description="Find the PyTorch bugs PyTorch stays silent about.")
    parser.add_argument("--version", action="version", version="torchlint %s" % __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="check Python files (directories are walked)",
                                description="Check Python files for PyTorch bugs.")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories (default: .)")
    check.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    check.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    check.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour")
    check.add_argument("--diff", action="store_true", help="print what --fix would change; write nothing")
    check.add_argument("--select", action="append", metavar="CODES",
                       help="rules to run: codes or prefixes, comma-separated")
    check.add_argument("--extend-select", action="append", metavar="CODES", help="rules to run in addition")
    check.add_argument("--ignore", action="append", metavar="CODES", help="rules not to run")
    check.add_argument("--no-infer", action="store_true", help="syntactic layer only (no type inference)")
    check.add_argument("--no-cache", action="store_true",
                       help="neither read nor write type-inference answers on disk (default: kept in "
                            "$TORCHLINT_CACHE_DIR, else $XDG_CACHE_HOME/torchlint or ~/.cache/torchlint)")
    check.add_argument("--infer-budget", type=_seconds, default=DEFAULT_INFER_BUDGET, metavar="SECONDS",
                       help="type inference time per file; past it the rest of the file is checked by names "
                            "alone (default: %g; 0: no limit)" % DEFAULT_INFER_BUDGET)
    check.add_argument("--show-all", action="store_true",
                       help="also report findings graded quiet (no evidence of harm), as hints (printed)")
    check.add_argument("--show-hints", action="store_true",
                       help="print hints too (default: counted in the summary line only; config: show-hints)")
    check.add_argument("--fail-on", choices=SEVERITIES, metavar="SEVERITY",
                       help="exit 1 on findings of this severity or worse: %s (default: config fail-on, "
                            "else %s)" % (", ".join(SEVERITIES), DEFAULT_SETTINGS.fail_on))
    check.add_argument("--python", metavar="PATH",
                       help="the interpreter whose packages the code uses, for type inference (default: "
                            "$TORCHLINT_PYTHON, config `python`, the active virtualenv, else this Python)")
    check.add_argument("--trust-workspace", action="store_true",
                       help="run the interpreter the project's config names (without it, only a virtual "
                            "environment's files are read; also: TORCHLINT_TRUST_WORKSPACE=1)")
    check.add_argument("--config", metavar="PATH", help="pyproject.toml to read [tool.torchlint] from")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (for pre-commit)")
    check.add_argument("--exit-zero", action="store_true",
                       help="exit 0 even when there are findings (or, with --diff, fixes to apply)")
    check.add_argument("--statistics", action="store_true",
                       help="print the number of findings per rule (hints per rule with --show-hints)")
    verbosity = check.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    verbosity.add_argument("-v", "--verbose", action="store_true", help="say what is checked and how long it takes")
    check.set_defaults(handler=command_check)

    rule = commands.add_parser("rule", help="explain a rule", description="Print a rule's documentation.")
    rule.add_argument("code", nargs="?", help="rule code, e.g. TL101")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(handler=command_rule)

    serve = commands.add_parser("serve", help="run the language server on stdio",
                                description="Serve the Language Server Protocol on stdin/stdout (for editors).")
    serve.set_defaults(handler=command_serve)

    verify = commands.add_parser("verify", help="run a Module for real and confirm the findings")
    verify_command.add_arguments(verify)
    verify.set_defaults(handler=verify_command.run)
    return parser


def command_serve(args) -> int:
    from .lsp.server import main as serve_lsp  # pygls loads only for this command
    return serve_lsp()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 for --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_ERROR
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("torchlint: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated:
        print("torchlint: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenPipeError:  # `torchlint check | head`: stop quietly, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS
