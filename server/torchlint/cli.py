"""The ``torchlint`` command: ``check`` files (and fix them), print a ``rule``'s doc.

Exit codes: 0 nothing found, 1 findings (or files that do not parse), 2 usage,
configuration or internal errors.
"""
from __future__ import annotations

import argparse
import difflib
import io
import logging
import os
import sys
import time
import tokenize
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from . import __version__
from .analysis.engine import CheckOptions, check_source
from .analysis.findings import ParseError, Position
from .config import Config, ConfigError, find_config, load_config
from .files import discover
from .fixing import fix_text, write_atomic
from .output import FORMATS, FileReport, OutputOptions, display_path, render
from .output.text import render_statistics
from .rules import ALL_RULES, RULES_BY_CODE
from .verify import cli_command as verify_command

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
PARALLEL_MIN_FILES = 16


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
    python: Optional[str] = None  # the interpreter the jedi layer analyses
    root: str = "."  # the project root: where jedi looks for the project's own modules


# One jedi layer per process and project, shared by every file that process checks: jedi's
# first trip into torch costs seconds, later ones milliseconds.
_INFERENCE = {}


def inference_for(job: Job):
    """The jedi layer for this job, or None (--no-infer, or jedi unusable: names alone then)."""
    if not job.infer:
        return None
    key = (job.root, job.python)
    if key not in _INFERENCE:
        try:
            from .analysis.inference import JediInference
            _INFERENCE[key] = JediInference(job.root, job.python)
        except Exception as err:  # no jedi, or an environment it cannot start: fall back, never fail
            logging.getLogger("torchlint").warning("type inference is off: %s", err)
            _INFERENCE[key] = None
    return _INFERENCE[key]


def check_file(job: Job) -> FileReport:
    report = FileReport(job.path)
    try:
        with open(job.path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        report.error = ParseError("IOError: cannot read file: %s" % (err.strerror or err), Position(1, 0))
        return report
    text, encoding, report.error = decode_source(data)
    if text is None:
        return report
    try:
        inference = inference_for(job)
        result = check_source(text, job.path, job.options, inference)
        if job.mode != "check" and result.parse_error is None:
            outcome = fix_text(text, job.path, job.options, job.unsafe_fixes, inference, result)
            result, report.fixed = outcome.result, outcome.fixed
            report.internal_errors.extend(outcome.errors)
            if outcome.text != text:
                if job.mode == "diff":
                    report.diff = unified_diff(text, outcome.text, job.display)
                else:
                    write_atomic(job.path, outcome.text.encode(encoding))
    except Exception:  # a torchlint bug or an unwritable file: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return report
    report.findings = list(result.findings)
    report.error = result.parse_error
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)
    return report


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


def run_jobs(jobs: Sequence[Job], verbose: bool = False) -> List[FileReport]:
    """Check many files in worker processes, few in this one; reports in the jobs' order."""
    cpus = os.cpu_count() or 1
    if len(jobs) >= PARALLEL_MIN_FILES and cpus > 1:
        try:
            with ProcessPoolExecutor(max_workers=min(cpus, 32), initializer=configure_logging,
                                     initargs=(verbose,)) as pool:
                return list(pool.map(check_file, jobs, chunksize=max(1, len(jobs) // (cpus * 4))))
        except (OSError, BrokenProcessPool):  # no process support here: check serially instead
            pass
    return [check_file(job) for job in jobs]


# -- the commands --------------------------------------------------------------------------------

def _codes(values: Optional[List[str]]) -> Optional[List[str]]:
    """Comma lists from repeated flags (`--select TL101,TL102 --select TL2`)."""
    if values is None:
        return None
    return [code.strip() for value in values for code in value.split(",") if code.strip()]


def _error(message: str) -> int:
    print("torchlint: error: %s" % message, file=sys.stderr)
    return EXIT_ERROR


def load_settings(args) -> Config:
    if args.config:
        config = load_config(args.config)
    else:
        config = find_config(os.path.commonpath([os.path.abspath(p) for p in args.paths]))
    return config.with_overrides(select=_codes(args.select), extend_select=_codes(args.extend_select) or (),
                                 ignore=_codes(args.ignore) or (), label="--%s")


def command_check(args) -> int:
    started = time.perf_counter()
    try:
        config = load_settings(args)
    except ConfigError as err:
        return _error(str(err))
    files, missing = discover([Path(p) for p in args.paths], config.root, config.exclude_patterns,
                              force_exclude=args.force_exclude)
    if missing:
        for path in missing:
            _error("%s: no such file or directory" % display_path(str(path), os.getcwd()))
        return EXIT_ERROR
    if not files and not args.quiet:
        print("torchlint: warning: no Python files found under %s" % " ".join(args.paths), file=sys.stderr)
    python = args.python or config.python
    if args.verbose:
        print("torchlint %s: config %s, root %s, %d files" % (
            __version__, config.path or "(defaults)", config.root, len(files)), file=sys.stderr)
        if not args.no_infer:
            layer = inference_for(Job("", "", CheckOptions(), root=str(config.root), python=python))
            print("torchlint: %s" % (layer.describe() if layer else "type inference is off (jedi unusable)"),
                  file=sys.stderr)

    mode = "diff" if args.diff else "fix" if args.fix else "check"
    cwd = os.getcwd()
    jobs = [Job(str(path), display_path(str(path), cwd), config.options_for(path), mode, args.unsafe_fixes,
                not args.no_infer, python, str(config.root)) for path in files]
    configure_logging(args.verbose)
    reports = run_jobs(jobs, args.verbose)

    internal = [error for report in reports for error in report.internal_errors]
    for error in internal:
        print("torchlint: internal error: %s" % error.rstrip(), file=sys.stderr)
    options = OutputOptions(unsafe_fixes=args.unsafe_fixes, fix_mode=mode == "fix", quiet=args.quiet, cwd=cwd)
    if mode == "diff":
        diffs = [report.diff for report in reports if report.diff]
        sys.stdout.write("".join(diffs))
        if not args.quiet:
            fixable = sum(report.fixed for report in reports)
            print("Would fix %d finding%s in %d file%s." % (
                fixable, "" if fixable == 1 else "s", len(diffs), "" if len(diffs) == 1 else "s"), file=sys.stderr)
        status = EXIT_FINDINGS if diffs else EXIT_CLEAN
    else:
        if args.statistics:
            sys.stdout.write(render_statistics(reports, options))
        else:
            sys.stdout.write(render(reports, args.format, options))
        found = any(report.findings or report.error for report in reports)
        status = EXIT_FINDINGS if found and not args.exit_zero else EXIT_CLEAN
    if args.verbose:
        print("torchlint: checked %d files in %.2fs" % (len(files), time.perf_counter() - started), file=sys.stderr)
    return EXIT_ERROR if internal else status


def command_rule(args) -> int:
    if args.all:
        width = max((len(rule.name) for rule in ALL_RULES), default=0)
        for rule in ALL_RULES:
            print("%s  %-*s  %s" % (rule.code, width, rule.name, rule.summary))
        return EXIT_CLEAN
    if not args.code:
        return _error("give a rule code (torchlint rule TL101) or --all")
    rule = RULES_BY_CODE.get(args.code.upper())
    if rule is None:
        return _error("unknown rule %r (torchlint rule --all lists them)" % args.code)
    try:
        doc = rule.doc()
    except OSError:
        doc = "# %s %s\n\n%s\n" % (rule.code, rule.name, rule.summary)
    sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
    return EXIT_CLEAN


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
    check.add_argument("--python", metavar="PATH",
                       help="the interpreter whose packages the code uses, for type inference "
                            "(default: config `python`, the active virtualenv, else this Python)")
    check.add_argument("--config", metavar="PATH", help="pyproject.toml to read [tool.torchlint] from")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (for pre-commit)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--statistics", action="store_true", help="print the number of findings per rule")
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
        return 130
    except BrokenPipeError:  # `torchlint check | head`: stop quietly, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS
