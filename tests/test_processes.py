"""torchlint.processes: a child ends with its whole process group, SIGTERM first and SIGKILL
after the grace, a stopped one too; tagged processes that left the group go as well; the CLI's
pool workers end the same way. Every child a test starts is ended, every wait bounded."""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from torchlint import processes

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and signals (POSIX)")
linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the tag scan reads /proc (Linux)")
LIMIT = 60  # seconds: a hang fails the test instead of blocking the suite

# A child that writes the pid of a grandchild (started with `grandchild_start`) to argv[1] once
# both have set their SIGTERM handling (`handling`), then sleeps.
CHILD = '''
import os, signal, subprocess, sys, time
{handling}
GRANDCHILD = """
import os, signal, sys, time
{grandchild_setup}
{handling}
open(sys.argv[1] + ".grandchild", "w").write(str(os.getpid()))
time.sleep(600)
"""
grandchild = subprocess.Popen([sys.executable, "-c", GRANDCHILD, sys.argv[1]])
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1] + ".grandchild") and time.monotonic() < deadline:
    time.sleep(0.01)
os.replace(sys.argv[1] + ".grandchild", sys.argv[1])
time.sleep(600)
'''
IGNORES_SIGTERM = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"
EXITS_3_ON_SIGTERM = "signal.signal(signal.SIGTERM, lambda *_: os._exit(3))"
DEFAULT_SIGTERM = "signal.signal(signal.SIGTERM, signal.SIG_DFL)"


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for an init that never reaps it)."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.01)


def start_child(tmp_path: Path, handling: str, grandchild_setup: str = ""):
    """(the child, its grandchild's pid), both ready."""
    ready = tmp_path / "ready"
    script = CHILD.format(handling=handling, grandchild_setup=grandchild_setup)
    tag = processes.Tag("TORCHLINT_TEST_TAG", tmp_path.name)
    process = processes.start([sys.executable, "-c", script, str(ready)], tag=tag)
    try:
        wait_until(ready.exists, "the child and its grandchild to start")
        return process, int(ready.read_text())
    except BaseException:
        processes.end(process, grace=0)
        raise


def kill_leftover(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@posix_only
def test_a_child_that_ignores_sigterm_is_killed_with_its_group_after_the_grace(tmp_path):
    process, grandchild = start_child(tmp_path, IGNORES_SIGTERM)
    try:
        processes.end(process, grace=0.2)
        assert process.returncode == -signal.SIGKILL
        if os.path.isdir("/proc/self"):
            wait_until(lambda: not running(grandchild), "the grandchild in the group to go")
    finally:
        kill_leftover(grandchild)


@posix_only
def test_sigterm_comes_first_and_the_child_may_end_itself(tmp_path):
    process, grandchild = start_child(tmp_path, EXITS_3_ON_SIGTERM)
    try:
        processes.end(process, grace=LIMIT)
        assert process.returncode == 3  # its own handler ran: not killed outright
    finally:
        kill_leftover(grandchild)


@posix_only
def test_a_stopped_child_gets_its_sigterm(tmp_path):
    process, grandchild = start_child(tmp_path, DEFAULT_SIGTERM)
    try:
        os.kill(process.pid, signal.SIGSTOP)
        processes.end(process, grace=LIMIT)
        assert process.returncode == -signal.SIGTERM  # continued, so SIGTERM took effect before any SIGKILL
    finally:
        kill_leftover(grandchild)


@linux_only
def test_a_tagged_process_that_left_the_group_is_killed_too(tmp_path):
    process, grandchild = start_child(tmp_path, IGNORES_SIGTERM, grandchild_setup="os.setsid()")
    try:
        assert os.getpgid(grandchild) != process.pid  # out of the group: only its tag finds it
        processes.end(process, grace=0.1, tag=processes.Tag("TORCHLINT_TEST_TAG", tmp_path.name))
        wait_until(lambda: not running(grandchild), "the tagged grandchild to go")
    finally:
        kill_leftover(grandchild)


def test_wait_says_how_it_ended(tmp_path):
    quick = processes.start([sys.executable, "-c", "pass"])
    try:
        assert processes.wait(quick, time.monotonic() + LIMIT) == processes.EXITED and quick.returncode == 0
    finally:
        processes.end(quick)
    sleeper = processes.start([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        ticks = []
        assert processes.wait(sleeper, time.monotonic() + 0.2, every=lambda: ticks.append(1)) == processes.TIMED_OUT
        assert ticks  # the caller's work between polls ran
        assert processes.wait(sleeper, time.monotonic() + LIMIT, cancelled=lambda: True) == processes.CANCELLED
        assert sleeper.poll() is None
    finally:
        processes.end(sleeper, grace=0)
    assert sleeper.returncode is not None  # reaped
    if os.name == "posix":
        assert sleeper.returncode == -signal.SIGKILL  # no grace: no SIGTERM either


def _ignore_sigterm(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(600)


def _default_sigterm(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ready.set()
    time.sleep(600)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="forked workers")
def test_pool_workers_end_with_sigterm_or_else_sigkill():
    context = multiprocessing.get_context("fork")
    ready = [context.Event(), context.Event()]
    workers = [context.Process(target=_ignore_sigterm, args=(ready[0],), daemon=True),
               context.Process(target=_default_sigterm, args=(ready[1],), daemon=True)]
    for worker in workers:
        worker.start()
    try:
        assert all(event.wait(LIMIT) for event in ready)
        processes.end_workers(workers, grace=0.2)
        assert [worker.exitcode for worker in workers] == [-signal.SIGKILL, -signal.SIGTERM]
    finally:
        for worker in workers:
            if worker.exitcode is None:
                worker.kill()
                worker.join(LIMIT)
