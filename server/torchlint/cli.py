"""The ``torchlint`` command: ``check`` files (and fix them), print a ``rule``'s doc.

Exit codes: 0 nothing found at or above ``--fail-on`` (default: warning), 1 such findings
(or files that do not parse), 2 usage, configuration or internal errors.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
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
from types import FrameType
from typing import (TYPE_CHECKING, Any, Dict, FrozenSet, Generator, Iterator, List, Mapping, Optional, Sequence,
                    Set, TextIO, Tuple, cast)

from . import __version__, collection, processes
from .adoption import Changes, GitError, changes_against
from .engine import CheckOptions, check_source
from .exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from .environments import Interpreter, choose_interpreter, own_interpreter
from .analysis.findings import CheckResult, Finding, ParseError, Position, Severity
from .inference.inference_cache import CacheEvents, InferenceCache, default_cache_dir
from .analysis.noqa import AddedNoqa, add_noqa
from .analysis.notebook import (CellMap, CellsChanged, CodeCell, NotebookError, is_notebook, join_cells,
                                read_notebook, split_cells, with_sources)
from .config import Config, ConfigError, find_config, load_config
from .files import DEFAULT_EXCLUDES, GitIgnores, GlobPattern, discover, read_regular_file, relative_to_root
from .fixing import NotWritten, fix_text, write_in_place
from .output import FORMATS, FileReport, OutputOptions, cell_position, display_path, render
from .output import json_format
from .output.text import render_statistics, unchecked_notes
from .rules import ALL_CODES
from .settings import DEFAULT_SETTINGS, SettingError, add_flags, flag_name, given_flags, spec_of
from .verify import cli_command as verify_command

if TYPE_CHECKING:  # (imported when a layer is made: --no-infer never loads jedi)
    from .inference.layer import JediInference

PARALLEL_MIN_FILES = 16
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
    mode: str = "check"  # "check", "fix" (write the fixes), "diff" (show them) or "noqa" (--add-noqa)
    unsafe_fixes: bool = False
    infer: bool = True  # False: --no-infer
    python: Optional[Interpreter] = None  # the environment the jedi layer analyses (None: the default choice)
    root: str = "."  # the project root: where jedi looks for the project's own modules
    cache_dir: Optional[str] = None  # where jedi's answers are kept between runs (None: --no-cache)
    infer_budget: Optional[float] = DEFAULT_SETTINGS.infer_budget  # seconds of jedi per file (None: no limit)
    max_file_size: int = DEFAULT_SETTINGS.max_file_size  # characters; a larger file is not checked
    lines: Optional[FrozenSet[int]] = None  # --changed-lines-only: only findings on these lines (None: all)
    data: Optional[bytes] = None  # the content when it is not read from ``path`` (standard input)
    noqa_hints: bool = False  # --add-noqa: hints get a directive too (they are printed: --show-hints...)


# One jedi layer per process, project and interpreter, shared by every file that process checks:
# jedi's first trip into torch costs seconds, later ones milliseconds. Keyed by pid too: a forked
# worker must never talk to its parent's jedi subprocess.
# (pid, root, interpreter, cache folder, budget) -> the layer, None when jedi cannot run there
_INFERENCE: Dict[Tuple[Any, ...], Optional["JediInference"]] = {}
_SAID: Set[str] = set()  # warnings this process already printed


def _say(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        print("torchlint: warning: %s" % message, file=sys.stderr, flush=True)


def inference_for(job: Job) -> Optional["JediInference"]:
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


def _new_layer(job: Job, interpreter: Optional[Interpreter]) -> Optional["JediInference"]:
    try:
        from .inference.layer import JediInference
        from .inference.inference_cache import InferenceCache
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
    noqa_added: int = 0  # --add-noqa: directives added or extended (written only with fixed_data)
    noqa_left: List[Finding] = field(default_factory=list)  # --add-noqa: findings no directive silences
    cache_events: CacheEvents = CacheEvents()  # what the jedi layer's disk caches met during this file


# A worker runs with the cyclic garbage collector off. A check frees what it built by reference
# counting (FileContext.release and the rules break their cycles: tests/test_garbage.py); most of
# what outlives it is jedi's model of torch, kept to the end of the run, which every collection
# would walk again (seconds each on a large project). So after each file what it left is put
# out of the collector's reach (gc.freeze: no walk). The jedi layer's trims (WORKER_MEMORY_LIMIT)
# collect what they drop; a worker without one collects the few cycles left as garbage once its
# peak memory has grown by COLLECT_AFTER_GROWTH since the last collection (every COLLECT_EVERY
# files where the peak cannot be read). A worker with one does not collect on growth: such
# collections freed nothing its trims would not. Figures: benchmarks/README.md#tuned-constants.
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


# A worker whose resident memory passes this between two files drops the many files the jedi layer
# read, else what it keeps and then collects (JediInference.trim_memory, not again before it grows
# by TRIM_GROWTH): the largest process of a run stays near it, under the 600 MB a run on a million
# lines may take. A trim costs time (its collection walks the whole heap, and the next files load
# again what was dropped), so the limit is as high as that bound allows: measured in
# benchmarks/README.md#tuned-constants.
WORKER_MEMORY_LIMIT = 512 * 2 ** 20


def _collect_now() -> None:
    """After each file a worker checked, or the main process when it checks many
    (_collected_as_a_worker; see COLLECT_AFTER_GROWTH, WORKER_MEMORY_LIMIT)."""
    if not _COLLECTED["worker"]:
        return  # the main process: Python's own schedule
    _COLLECTED["files"] += 1
    layers = [layer for (pid, *_), layer in _INFERENCE.items() if pid == os.getpid() and layer is not None]
    trimmed = False
    for layer in layers:
        trimmed = layer.trim_memory(WORKER_MEMORY_LIMIT) or trimmed
    peak = _peak_memory()
    if trimmed or not layers and (peak is None and _COLLECTED["files"] % COLLECT_EVERY == 0
                                  or peak is not None and peak - _COLLECTED["peak"] >= COLLECT_AFTER_GROWTH):
        collection.collect_everything()
        _COLLECTED["peak"] = _peak_memory() or 0
    collection.freeze()


def check_file(job: Job) -> Checked:
    checked = _check_file(job)
    _collect_now()
    return checked


def _check_file(job: Job) -> Checked:
    checked = Checked(FileReport(job.path))
    report = checked.report
    notebook = is_notebook(job.path)
    # A character takes at most 4 bytes: a source file of more is too large, and is not read whole.
    # (A notebook's JSON holds its outputs too: the limit is on its code, once joined.)
    most = None if notebook else _MAX_BYTES_A_CHARACTER * job.max_file_size
    try:
        data = read_regular_file(job.path, most) if job.data is None else job.data
    except OSError as err:
        checked.unreadable = "cannot read: %s" % (err.strerror or err)
        return checked
    if notebook:
        return check_notebook(job, data, checked)
    if most is not None and len(data) > most:
        checked.unreadable = too_large(job)
        return checked
    text, encoding, report.error = decode_source(data)
    if text is None:
        return checked
    if len(text) > job.max_file_size:
        checked.unreadable = too_large(job)
        return checked
    try:
        inference = inference_for(job)
        result = on_lines(check_source(text, job.path, job.options, inference), job.lines)
        if job.mode == "noqa" and result.parse_error is None:
            added, result = noqa_text(job, text, result, inference)
            checked.noqa_added, checked.noqa_left = added.added, noqa_wanted(job, result.findings)
            if added.text != text:
                checked.original, checked.fixed_data = data, added.text.encode(encoding)
        elif job.mode != "check" and result.parse_error is None:
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
        _take_layer_news(job, inference, checked)
    except Exception:  # a torchlint bug: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return checked
    report.findings, report.unchecked, report.cut_short = list(result.findings), list(result.unchecked), \
        list(result.cut_short)
    report.error = result.parse_error
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)
    return checked


def _take_layer_news(job: Job, inference: Optional["JediInference"], checked: Checked) -> None:
    """What the jedi layer has to say after this file: why its answers stopped short here (the
    budget: a note, and the report says the file was checked by names alone past it), and what
    its disk caches met (said once for the run by the main process)."""
    if inference is None:
        if job.infer:  # jedi could not start, or timed out earlier in this run
            checked.report.names_only = "type inference is off for the rest of this run"
        return
    notes = sorted(set(inference.take_notes().values()))
    checked.notes.extend(notes)
    checked.report.names_only = "; ".join(notes)
    checked.cache_events = inference.take_cache_events()


_MAX_BYTES_A_CHARACTER = 4  # UTF-8's longest, and GB18030's


def too_large(job: Job) -> str:
    """Why a file of more than ``job.max_file_size`` characters (the editor's limit too) was not
    checked: parsing and checking it could take minutes and gigabytes (53.6 MB: 289 s, 11.4 GB)."""
    flag = flag_name(spec_of("max_file_size"))
    return "larger than %s (%d characters): not checked (exclude it, or give a larger %s)" % (
        flag, job.max_file_size, flag)


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
    if len(joined.text) > job.max_file_size:
        checked.unreadable = too_large(job)
        return checked
    report.cells = joined.cells
    try:
        inference = inference_for(job)
        result = check_source(joined.text, job.path, job.options, inference)
        if job.mode == "noqa" and result.parse_error is None and not joined.errors:
            added, after = noqa_text(job, joined.text, result, inference)
            try:
                sources = split_cells(joined, added.text) if added.text != joined.text else {}
            except CellsChanged as err:
                checked.notes.append("no noqa directive added (%s)" % err)
                sources = {}
            if sources:
                result = after
                checked.noqa_added = added.added
                checked.original, checked.fixed_data = data, with_sources(notebook, sources).encode("utf-8")
            checked.noqa_left = [report.cells.relabel(f) for f in noqa_wanted(job, result.findings)]
        elif job.mode != "check" and result.parse_error is None:
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
        _take_layer_news(job, inference, checked)
    except Exception:  # a torchlint bug: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return checked
    report.findings = [report.cells.relabel(finding) for finding in result.findings]
    report.unchecked = list(result.unchecked)  # (placed in their cells when printed: output.cell_position)
    report.cut_short = list(result.cut_short)
    report.error = result.parse_error or (joined.errors[0] if joined.errors else None)
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)
    return checked


def on_lines(result: CheckResult, lines: Optional[FrozenSet[int]]) -> CheckResult:
    """``result`` with only the findings that span one of ``lines`` (None: all of them)."""
    if lines is not None:
        result.findings = [f for f in result.findings
                           if any(line in lines for line in range(f.range.start.line, f.range.end.line + 1))]
    return result


def noqa_wanted(job: Job, findings: Sequence[Finding]) -> List[Finding]:
    """The findings --add-noqa silences: those the text output prints (hints only when printed)."""
    return [f for f in findings if job.noqa_hints or f.severity is not Severity.HINT]


def noqa_text(job: Job, text: str, result: CheckResult, inference: Any) -> Tuple[AddedNoqa, CheckResult]:
    """--add-noqa on a parsed text: (what was added, the check of the new text). The new text is
    checked again, so what it still reports is what the directives did not silence."""
    try:
        added = add_noqa(text, noqa_wanted(job, result.findings))
    except (SyntaxError, tokenize.TokenError) as err:
        raise RuntimeError("the tokenizer cannot read the file (%s); no noqa directive added" % err) from None
    if not added.lines:
        return added, result
    after = check_source(added.text, job.path, job.options, inference)
    if after.parse_error is not None:  # never written: a torchlint bug
        raise RuntimeError("the noqa directives made the file unparsable (%s); none was added"
                           % after.parse_error.message)
    return added, on_lines(after, job.lines)


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


def run_jobs(jobs: Sequence[Job], verbose: bool = False,
             progress: Optional["Progress"] = None) -> Generator[Checked, None, None]:
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
            # A few files of one folder per task, all queued at once: a worker takes the next batch
            # the moment it is free. Files of one folder import the same modules, which the jedi
            # layer then reads once for all of them (a worker keeps a few dozen; files handed out
            # one by one in any order made each read them again: a third of the CPU time on
            # transformers' models). Largest batches first: a big one started last would keep one
            # worker busy while the others have nothing left. Not pool.map: on an interrupt it
            # cancels what is pending, which the pool's own thread then trips over when the
            # workers are killed.
            # each job's batch and its place there
            placed: List[Tuple[Optional[Future[List[Checked]]], int]] = [(None, 0)] * len(jobs)
            for batch in _batches(jobs):
                future = pool.submit(check_files, [jobs[index] for index in batch])
                if progress is not None:
                    for _ in batch:
                        future.add_done_callback(progress.file_done)
                for place, index in enumerate(batch):
                    placed[index] = (future, place)
            for future_of_batch, place in placed:
                checked = cast("Future[List[Checked]]", future_of_batch).result()[place]  # (all submitted above)
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
    with _collected_as_a_worker() if len(jobs) - done >= PARALLEL_MIN_FILES else contextlib.nullcontext():
        for job in jobs[done:]:
            checked = check_file(job)
            if progress is not None:
                progress.file_done()
            yield checked


@contextlib.contextmanager
def _collected_as_a_worker() -> Generator[None, None, None]:
    """Many files checked in this process (one CPU, or no process support): collect as a worker
    does (_collect_now), memory limit included. On Python's own schedule each collection walks
    jedi's model of torch again, and the process grew past WORKER_MEMORY_LIMIT with nothing to
    trim it (benchmarks/README.md#tuned-constants)."""
    if _COLLECTED["worker"]:
        yield  # a worker already does
        return
    _COLLECTED["worker"], _COLLECTED["peak"] = True, _peak_memory() or 0
    try:
        with collection.paused():
            yield
    finally:
        _COLLECTED["worker"] = False


class Progress:
    """``torchlint: 120/471 files, 3.4 s`` on one line of a terminal's stderr, redrawn a few times a
    second once a run has taken ``PROGRESS_AFTER`` seconds, and wiped at the end. Only for a
    terminal outside CI (``CI`` unset); -q turns it off."""

    def __init__(self, total: int, stream: TextIO, started: Optional[float] = None, interval: float = 0.25) -> None:
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
    def wanted(stream: TextIO, quiet: bool, environ: Optional[Mapping[str, str]] = None) -> bool:
        environ = os.environ if environ is None else environ
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            return False
        return tty and not quiet and not environ.get("CI")

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False

    @contextlib.contextmanager
    def cleared(self) -> Iterator[None]:
        """Print a message during the run: the line is wiped first and drawn again later."""
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            yield

    def file_done(self, _future: Optional["Future[Any]"] = None) -> None:
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


# The most files of one folder a worker is given at once (see run_jobs; benchmarks/README.md#tuned-constants).
BATCH_FILES = 8


def _batches(jobs: Sequence[Job]) -> List[List[int]]:
    """The jobs' indices in batches: files of one folder, in the jobs' order, at most BATCH_FILES
    per batch; the batches with the most bytes first."""
    by_folder: Dict[str, List[int]] = {}
    for index, job in enumerate(jobs):
        by_folder.setdefault(os.path.dirname(os.path.abspath(job.path)), []).append(index)
    batches = [indices[start:start + BATCH_FILES] for indices in by_folder.values()
               for start in range(0, len(indices), BATCH_FILES)]
    return sorted(batches, key=lambda batch: -sum(_size(jobs[index].path) for index in batch))


def check_files(jobs: List[Job]) -> List[Checked]:
    """A worker's task: a batch of files, checked in order."""
    return [check_file(job) for job in jobs]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # reported when its worker reads it


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the workers now rather than wait for the files they are on (the main process writes
    every fixed file: a worker ended midway leaves nothing half done)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    processes.end_workers(workers)
    pool.shutdown(wait=False)
    if manager is not None:
        manager.join(timeout=10)  # it marks the unfinished work as failed, then ends


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def start_worker(verbose: bool, main_pid: int) -> None:
    """Pool initializer: log like the main process, leave Ctrl-C to it, and die with it. Its
    garbage collector runs only when _collect_now says so."""
    configure_logging(verbose)
    _COLLECTED["worker"], _COLLECTED["peak"] = True, _peak_memory() or 0
    collection.stop_automatic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process stops the pool itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the main process's handler (a fork inherits it): end at once
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

def _error(message: str) -> int:
    print("torchlint: error: %s" % message, file=sys.stderr)
    return EXIT_ERROR


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


def _stop_on(signum: int, frame: Optional[FrameType]) -> None:
    _SIGNALLED.append(signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def stop_if_signalled() -> None:
    """Raise again a stopping signal whose exception Python swallowed: one that landed in a
    ``__del__`` or a garbage-collector callback is printed as "ignored" and lost. Called before
    anything is written and between files, so a run signalled to stop never goes on."""
    if _SIGNALLED:
        raise Terminated() if _SIGNALLED[0] == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def _signals_stop_the_run() -> Iterator[None]:
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


def command_check(args: argparse.Namespace) -> int:
    with _signals_stop_the_run():
        status = _check(args)
    # What the check built (the last trees, jedi's caches) lives until the process ends; the
    # collection at exit would walk all of it again (benchmarks/README.md#tuned-constants).
    collection.freeze()
    return status


def _check(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if not args.paths:  # `--stdin-filename NAME` alone reads standard input, as `-` does
        args.paths = ["-"] if args.stdin_filename is not None else ["."]
    usage = usage_problem(args)
    if usage:
        return _error(usage)
    stdin = args.paths == ["-"]
    try:
        config = load_settings(args)
    except ConfigError as err:
        return _error(str(err))
    cwd = os.getcwd()
    mode = "noqa" if args.add_noqa else "diff" if args.diff else "fix" if args.fix else "check"
    # With `-`, --fix and --add-noqa print the new text on stdout: the report goes to stderr.
    report_stream = sys.stderr if stdin and mode in ("fix", "noqa") else sys.stdout
    problems = 0
    changes = None
    stdin_data: Optional[bytes] = None
    if stdin:
        name = args.stdin_filename
        path = Path(os.path.abspath(name)) if name else Path(cwd) / "-"
        stdin_data = sys.stdin.buffer.read()
        why = exclusion_reason(path, config) if args.force_exclude and name else None
        if why is not None:  # nothing to check; --fix and --add-noqa give the text back as it came
            if not args.quiet:
                print("torchlint: note: skipped %s: %s" % (display_path(str(path), cwd), why), file=sys.stderr)
            if mode in ("fix", "noqa"):
                sys.stdout.buffer.write(stdin_data)
                sys.stdout.flush()
            return EXIT_CLEAN
        files = [path]
    else:
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
        if args.diff_against is not None:
            try:
                changes = changes_against(args.diff_against, git_directory(args.paths), args.changed_lines_only)
            except GitError as err:
                return _error("--diff-against: %s" % err)
            walked, files = len(files), [path for path in files if changes.contains(path)]
            if args.verbose:
                print("torchlint: %d of %d files changed against %s (merge base %s)" % (
                    len(files), walked, changes.ref, changes.base[:12]), file=sys.stderr)
        if not files and not args.quiet:
            explain_nothing_to_check(args, config, changes, found.files, cwd)
        elif args.force_exclude and args.verbose:
            for path, why in named_and_excluded(args.paths, found.files, config):
                print("torchlint: note: skipped %s: %s" % (display_path(str(path), cwd), why), file=sys.stderr)
    python = None
    settings = config.settings
    budget = settings.infer_budget or None  # 0: no limit
    cache_dir = str(default_cache_dir()) if settings.inference_cache and not args.no_infer else None
    if not args.no_infer:
        choice = choose_interpreter(explicit=settings.interpreter, configured=config.python, config_file=config.path,
                                    trust_workspace=settings.trust_workspace_interpreter)
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

    def lines_of(path: Path) -> Optional[FrozenSet[int]]:
        # A notebook's git lines are JSON: a changed notebook is reported whole.
        if changes is None or not args.changed_lines_only or is_notebook(str(path)):
            return None
        return changes.lines_of(path)

    jobs = [Job(str(path), "-" if stdin and not args.stdin_filename else display_path(str(path), cwd),
                config.options_for(path), mode, args.unsafe_fixes, not args.no_infer, python, str(config.root),
                cache_dir, budget, settings.max_file_size, lines=lines_of(path), data=stdin_data,
                noqa_hints=hints_printed(config))
            for path in files]
    configure_logging(args.verbose)
    reports = []
    notes: List[str] = []  # said after the progress line is gone
    noqa_files = noqa_added = 0
    noqa_left: List[str] = []
    cache_dropped = 0
    not_read = 0  # files not checked at all (too large, unreadable): errors above, and the summary says so
    stdin_result: Optional[Checked] = None
    progress = Progress(len(jobs), sys.stderr) if Progress.wanted(sys.stderr, args.quiet) else None
    with progress or contextlib.nullcontext(), contextlib.closing(run_jobs(jobs, args.verbose, progress)) as results:
        for job, checked in zip(jobs, results):
            stop_if_signalled()
            if checked.unreadable:
                problem = "%s: %s" % (job.display, checked.unreadable)
                not_read += 1
            elif mode == "noqa" and checked.report.error is not None:
                problem = "%s: does not parse (%s); no noqa directive added (fix it, then run again)" % (
                    job.display, parse_error_place(checked.report))
            elif stdin:
                problem, stdin_result = None, checked  # the new text goes to stdout below
            else:
                problem = write_fixes(checked, job.display, mode)
            if problem:
                with progress.cleared() if progress else contextlib.nullcontext():
                    _error(problem)
                problems += 1
            if not checked.unreadable:
                reports.append(checked.report)
            if checked.noqa_added:
                noqa_files, noqa_added = noqa_files + 1, noqa_added + checked.noqa_added
            noqa_left.extend(not_silenced(job.display, checked))
            notes.extend("%s: %s" % (job.display, note) for note in checked.notes)
            cache_dropped += checked.cache_events.dropped
            for unwritten in checked.cache_events.unwritten:
                with progress.cleared() if progress else contextlib.nullcontext():
                    _say("%s; the findings are the same, later runs are slower" % unwritten)
    stop_if_signalled()
    if stdin and mode in ("fix", "noqa"):  # like ruff: the text, fixed or not, on stdout
        fixed = stdin_result.fixed_data if stdin_result is not None else None
        sys.stdout.buffer.write(cast(bytes, stdin_data) if fixed is None else fixed)  # (read: stdin)
        sys.stdout.flush()
    for note in notes + unchecked_notes(reports, OutputOptions(cwd=cwd), args.verbose) if not args.quiet else ():
        print("torchlint: note: %s" % note, file=sys.stderr)
    if cache_dir is not None:
        InferenceCache(Path(cache_dir)).trim()

    internal = [error for report in reports for error in report.internal_errors]
    for error in internal:
        print("torchlint: internal error: %s" % error.rstrip(), file=sys.stderr)
    cut_short = [report for report in reports if report.cut_short]
    for report in cut_short:  # (said even with -q: findings were lost, and the exit status says so)
        print("torchlint: error: %s: %s could not check this file: its code is nested deeper than Python's "
              "recursion limit lets the rule follow (a 1,000-deep expression); its findings there are missing"
              % (display_path(report.path, cwd), ", ".join(report.cut_short)), file=sys.stderr)
    options = OutputOptions(unsafe_fixes=args.unsafe_fixes, fix_mode=mode == "fix", quiet=args.quiet, cwd=cwd,
                            show_hints=hints_printed(config), files_not_checked=not_read)
    written = None
    if mode == "noqa":
        for message in noqa_left:
            print("torchlint: warning: %s" % message, file=sys.stderr)
        if not args.quiet:
            print("Added %d noqa directive%s to %d file%s.%s" % (
                noqa_added, "" if noqa_added == 1 else "s", noqa_files, "" if noqa_files == 1 else "s",
                " %d finding%s could not be silenced (above)." % (len(noqa_left), "" if len(noqa_left) == 1 else "s")
                if noqa_left else ""), file=sys.stderr)
        status = EXIT_FINDINGS if noqa_left and not args.exit_zero else EXIT_CLEAN
    elif mode == "diff":
        diffs = "".join(report.diff for report in reports if report.diff)
        written = emit(diffs if not diffs or diffs.endswith("\n") else diffs + "\n", args, report_stream)
        count = sum(1 for report in reports if report.diff)
        if not args.quiet:
            fixable = sum(report.fixed for report in reports)
            print("Would fix %d finding%s in %d file%s." % (
                fixable, "" if fixable == 1 else "s", count, "" if count == 1 else "s"), file=sys.stderr)
        # A preview of --fix, which fixes whatever it can (hints too): 1 when it would change a file.
        status = EXIT_FINDINGS if count and not args.exit_zero else EXIT_CLEAN
    else:
        if args.statistics:
            statistics = json_format.render_statistics if args.format == "json" else render_statistics
            written = emit(statistics(reports, options), args, report_stream)
        else:
            written = emit(render(reports, args.format, options), args, report_stream)
        status = EXIT_FINDINGS if failed(reports, config) and not args.exit_zero else EXIT_CLEAN
    if written:
        _error(written)
        problems += 1
    if args.verbose:
        if cache_dropped:
            print("torchlint: %d cache entr%s failed their checks (damaged or altered): deleted, computed again"
                  % (cache_dropped, "y" if cache_dropped == 1 else "ies"), file=sys.stderr)
        print("torchlint: checked %d files in %.2fs" % (len(files), time.perf_counter() - started), file=sys.stderr)
    return EXIT_ERROR if internal or cut_short or problems else status


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


def emit(text: str, args: argparse.Namespace, stream: TextIO) -> Optional[str]:
    """Write the report to ``--output-file`` (its folders made as needed) or ``stream``; the error
    message when the file cannot be written."""
    if args.output_file is None:
        stream.write(text)
        stream.flush()  # before the summary line on stderr: the two never interleave
        return None
    try:
        target = Path(args.output_file)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as err:
        return "--output-file %s: cannot write: %s" % (args.output_file, err.strerror or err)
    return None


def git_directory(paths: Sequence[str]) -> str:
    """Where to ask git about the paths: their common folder."""
    common = os.path.commonpath([os.path.abspath(p) for p in paths])
    return common if os.path.isdir(common) else os.path.dirname(common)


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


def exclusion_reason(path: Path, config: Config) -> Optional[str]:
    """Why the excludes (--force-exclude) leave out a path named on the command line, or None:
    the pattern that decides (the last one that matches the path or a folder above it below the
    root, as discovery reads them), else a .gitignore file."""
    defaults = [GlobPattern(p) for p in DEFAULT_EXCLUDES]
    rel = relative_to_root(path, config.root)
    entries: List[Tuple[Optional[str], str, bool]] = []
    if rel is not None and rel != ".":
        parts = rel.split("/")
        entries = [("/".join(parts[: i + 1]), parts[i], True) for i in range(len(parts) - 1)]
    entries.append((rel, path.name, os.path.isdir(path)))
    for entry in entries:
        decided = None
        for pattern in defaults + config.exclude_patterns:
            if pattern.matches(*entry):
                decided = None if pattern.negated else pattern
        if decided is not None:
            where = "a default exclude" if any(decided is d for d in defaults) else "an exclude in %s" % (
                display_path(str(config.path)) if config.path else "the settings")
            return "excluded by `%s` (%s), and --force-exclude applies the excludes to the paths named" % (
                decided.pattern, where)
    if GitIgnores(config.root).ignored_file(path):
        return "ignored by a .gitignore file, and --force-exclude applies it to the paths named"
    return None


def named_and_excluded(paths: Sequence[str], files: Sequence[Path], config: Config) -> List[Tuple[Path, str]]:
    """(path, why) for each path named on the command line that --force-exclude left out."""
    kept = set(files)
    result = []
    for name in paths:
        path = Path(os.path.abspath(name))
        if path in kept or not os.path.exists(path):
            continue
        why = exclusion_reason(path, config)
        if why is not None:
            result.append((path, why))
    return result


def explain_nothing_to_check(args: argparse.Namespace, config: Config, changes: Optional[Changes],
                             walked: Sequence[Path], cwd: str) -> None:
    """Why a run has no file to check, on stderr."""
    if changes is not None and walked:
        print("torchlint: note: no Python file under %s changed against %s" % (" ".join(args.paths), changes.ref),
              file=sys.stderr)
        return
    excluded = named_and_excluded(args.paths, walked, config) if args.force_exclude else []
    for path, why in excluded:
        print("torchlint: note: skipped %s: %s" % (display_path(str(path), cwd), why), file=sys.stderr)
    explained = {str(path) for path, _ in excluded}
    rest = [name for name in args.paths if os.path.abspath(name) not in explained]
    if rest:
        print("torchlint: warning: no Python files found under %s" % " ".join(rest), file=sys.stderr)


def command_rule(args: argparse.Namespace) -> int:
    if args.all:
        width = max(len(entry.name) for entry in ALL_CODES.values())
        for listed in ALL_CODES.values():
            print("%s  %-*s  %s" % (listed.code, width, listed.name, listed.summary))
        return EXIT_CLEAN
    if not args.code:
        return _error("give a rule code (torchlint rule TL101) or --all")
    asked = ALL_CODES.get(args.code.upper())
    if asked is None:
        return _error("unknown rule %r (torchlint rule --all lists them)" % args.code)
    try:
        doc = asked.doc()
    except OSError:
        doc = "# %s %s\n\n%s\n" % (asked.code, asked.name, asked.summary)
    sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
    return EXIT_CLEAN


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchlint", description="Find the PyTorch bugs PyTorch stays silent about.")
    parser.add_argument("--version", action="version", version="torchlint %s" % __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="check Python files (directories are walked)",
                                description="Check Python files for PyTorch bugs.")
    check.add_argument("paths", nargs="*", default=[], metavar="PATH",
                       help="files or directories (default: .); `-` reads one file from standard input")
    check.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    check.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    check.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour")
    check.add_argument("--diff", action="store_true", help="print what --fix would change; write nothing")
    check.add_argument("--no-infer", action="store_true", help="syntactic layer only (no type inference)")
    add_flags(check, "check")  # the settings' flags: --select, --no-cache, --fail-on... (torchlint.settings)
    check.add_argument("--config", metavar="PATH", help="pyproject.toml to read [tool.torchlint] from")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (for pre-commit)")
    check.add_argument("--exit-zero", action="store_true",
                       help="exit 0 even when there are findings (or, with --diff, fixes to apply)")
    check.add_argument("--statistics", action="store_true",
                       help="print the number of findings per rule instead of the findings (hints per rule with "
                            "--show-hints; a JSON array with --format json)")
    check.add_argument("--add-noqa", action="store_true",
                       help="append `# noqa: CODE` to each line with a finding (to adopt torchlint on code that "
                            "has findings: only new ones are reported afterwards)")
    check.add_argument("--diff-against", metavar="REF",
                       help="check only the files changed against git REF (since the merge base, plus "
                            "uncommitted and untracked files)")
    check.add_argument("--changed-lines-only", action="store_true",
                       help="with --diff-against: report only the findings on changed lines")
    check.add_argument("--stdin-filename", metavar="NAME",
                       help="the name of the file read from standard input (`-`): its settings, "
                            "per-file-ignores and the name reported")
    check.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
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


def command_serve(args: argparse.Namespace) -> int:
    collection.restart_on_system_allocator()  # (before pygls loads and anything is read)
    from .lsp.server import main as serve_lsp  # pygls loads only for this command
    return serve_lsp()


_STOPPED_BY_SIGNAL: List[int] = []  # main() ended on SIGINT or SIGTERM (see console_main)


def console_main() -> None:
    """The ``torchlint`` command and ``python -m torchlint``. After a stopping signal the run has
    ended its workers itself; Python's own exit would then join the process pool's manager thread
    with no time limit, and that thread can wait forever on a pipe no worker reads any more. So
    such a run ends at once, output flushed, without waiting for threads."""
    status = main()
    if _STOPPED_BY_SIGNAL:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)
    sys.exit(status)


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
        return cast(int, args.handler(args))
    except KeyboardInterrupt:
        _STOPPED_BY_SIGNAL.append(signal.SIGINT)
        print("torchlint: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated:
        _STOPPED_BY_SIGNAL.append(signal.SIGTERM)
        print("torchlint: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenPipeError:  # `torchlint check | head`: stop quietly, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS
