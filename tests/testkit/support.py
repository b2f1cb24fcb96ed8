"""Helpers the test files import (``from testkit.support import run_cli``): the CLI run in-process or in a
child process of its own, the rule fixtures, how findings read in failures, a child's SIGINT. Not in conftest.py: a test importing
``conftest`` may get tests/verify's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULE_FIXTURES = ROOT / "tests" / "fixtures" / "rules"
CHECK_TIMEOUT = 300  # seconds a `torchlint check` child may take: a bound for a slow, busy machine, not a timing


def rule_fixture_files():
    return sorted(RULE_FIXTURES.glob("*.py"))


def describe(finding) -> str:
    return "%d:%d %s %s" % (finding.range.start.line, finding.range.start.column, finding.code, finding.message)


def default_sigint() -> None:
    """``preexec_fn`` for a child that is sent SIGINT: Python turns SIGINT into KeyboardInterrupt
    only when it starts with SIGINT's default action, and pytest run as a background job (a
    script's ``cmd &``) passes it on ignored."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(argv, capsys, cwd=None):
    """``torchlint.cli.main`` in-process, from ``cwd``: (exit code, stdout, stderr)."""
    from torchlint import cli

    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = cli.main([str(a) for a in argv])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, out, err


def check_in_a_process(args, cwd, timeout: float = CHECK_TIMEOUT, preexec_fn=None,
                       **env: str) -> "subprocess.CompletedProcess[str]":
    """``torchlint check ARGS`` run from ``cwd`` in a child process (this checkout's server/ first on
    its path; ``env`` added to the environment; ``preexec_fn`` run in the child first), bounded by
    ``timeout``."""
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "server"), os.environ.get("PYTHONPATH"))
                                                          if p), **env)
    return subprocess.run([sys.executable, "-m", "torchlint", "check", *map(str, args)], cwd=str(cwd), env=environ,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn)
