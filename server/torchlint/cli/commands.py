"""The ``torchlint`` command's parser and subcommands (``check``: check.py)."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Optional, Sequence, Tuple, cast

from .. import __version__, collection
from ..exit_codes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from ..output import FORMATS
from ..rules import ALL_CODES
from ..settings import add_flags
from ..verify import cli_command as verify_command
from .check import command_check
from .reporting import error
from .signals import Terminated


def command_rule(args: argparse.Namespace) -> int:
    if args.all:
        width = max(len(entry.name) for entry in ALL_CODES.values())
        for listed in ALL_CODES.values():
            print("%s  %-*s  %s" % (listed.code, width, listed.name, listed.summary))
        return EXIT_CLEAN
    if not args.code:
        return error("give a rule code (torchlint rule TL101) or --all")
    asked = ALL_CODES.get(args.code.upper())
    if asked is None:
        return error("unknown rule %r (torchlint rule --all lists them)" % args.code)
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
    from ..lsp.server import main as serve_lsp  # pygls loads only for this command
    return serve_lsp()


def console_main() -> None:
    """The ``torchlint`` command and ``python -m torchlint``. After a stopping signal the run has
    ended its workers itself; Python's own exit would then join the process pool's manager thread
    with no time limit, and that thread can wait forever on a pipe no worker reads any more. So
    such a run ends at once, output flushed, without waiting for threads."""
    status, stopped = run_command(None)
    if stopped:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)
    sys.exit(status)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(argv)[0]


def run_command(argv: Optional[Sequence[str]]) -> Tuple[int, bool]:
    """(the exit status, whether SIGINT or SIGTERM stopped the command)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 for --help
        return (exit_.code if isinstance(exit_.code, int) else EXIT_ERROR), False
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR, False
    try:
        return cast(int, args.handler(args)), False
    except KeyboardInterrupt:
        print("torchlint: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT, True
    except Terminated:
        print("torchlint: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM, True
    except BrokenPipeError:  # `torchlint check | head`: stop quietly, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS, False
