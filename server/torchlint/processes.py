"""Child processes, started, waited for and ended one way: jedi's interpreter (inference.layer),
the verification probe (verify.runner) and the CLI's worker processes (cli).

A child starts in its own process group (a new session on POSIX), so ending it reaches what it
started too, and the terminal's Ctrl-C reaches only the process that decides what to stop.
Ending one: SIGTERM to its whole group (with SIGCONT, so that a stopped process gets it too),
up to ``GRACE_S`` for the group to go (torch's shared-memory files and the like are removed on
SIGTERM, never on SIGKILL), SIGKILL to whatever is left, then the child is reaped. A child may
carry a :class:`Tag` in its environment, inherited by everything it starts: on Linux, ending it
also kills every process with that tag, which reaches those that left the group (``setsid()``,
a double fork). Every wait here is bounded.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

GRACE_S = 1.0  # from SIGTERM to SIGKILL
REAP_S = 5.0  # waiting for a killed child's exit status (a process in uninterruptible sleep may take long)
POLL_S = 0.05
TAG_KILL_ROUNDS = 20  # scans for tagged processes until none is left

# How a wait ended.
EXITED = "exited"
TIMED_OUT = "timed out"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class Tag:
    """``variable=value`` in a child's environment: how its descendants are found (Linux /proc)."""

    variable: str
    value: str

    def processes(self) -> List[int]:
        """The processes (other than this one) whose environment carries the tag."""
        needle = ("%s=%s" % (self.variable, self.value)).encode()
        found: List[int] = []
        try:
            entries = os.listdir("/proc")
        except OSError:
            return found
        me = os.getpid()
        for entry in entries:
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open("/proc/%s/environ" % entry, "rb") as handle:
                    environ = handle.read()
            except OSError:  # gone, or not ours
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
        return found

    def kill_all(self) -> None:
        """SIGKILL every tagged process. Each is stopped first and the scan repeats until it finds
        none, so a process forking as fast as it can cannot slip a new child past the kill."""
        if not os.path.isdir("/proc"):
            return
        for _ in range(TAG_KILL_ROUNDS):
            pids = self.processes()
            if not pids:
                return
            for signum in (signal.SIGSTOP, signal.SIGKILL):
                for pid in pids:
                    _signal(pid, signum)


def start(command: Sequence[str], env: Optional[Dict[str, str]] = None, tag: Optional[Tag] = None,
          **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(command, **options)`` in a process group of its own; ``tag`` is added
    to its environment (``env``, else this process's). Raises OSError when it cannot start."""
    if tag is not None:
        env = dict(os.environ if env is None else env)
        env[tag.variable] = tag.value
    if os.name == "posix":
        options["start_new_session"] = True
    else:
        options["creationflags"] = (options.get("creationflags", 0)
                                    | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]  # (Windows)
                                    | getattr(subprocess, "CREATE_NO_WINDOW", 0))
    return subprocess.Popen(list(command), env=env, **options)


def wait(process: subprocess.Popen[bytes], deadline: float, cancelled: Optional[Callable[[], bool]] = None,
         every: Optional[Callable[[], object]] = None) -> str:
    """Wait for the child until the ``time.monotonic()`` ``deadline``: EXITED, TIMED_OUT, or
    CANCELLED once ``cancelled()`` says so. ``every`` runs between polls (a few times a second)."""
    while True:
        try:
            process.wait(timeout=POLL_S)
            return EXITED
        except subprocess.TimeoutExpired:
            pass
        if every is not None:
            every()
        if cancelled is not None and cancelled():
            return CANCELLED
        if time.monotonic() >= deadline:
            return TIMED_OUT


def end(process: subprocess.Popen[bytes], grace: float = GRACE_S, tag: Optional[Tag] = None) -> None:
    """End a child started by :func:`start` and its whole process group (and, with ``tag``,
    every tagged process), then reap it. Also for a child that already exited: what it left
    running in its group goes too. ``grace`` 0: SIGKILL at once, no SIGTERM (code that must not
    run on, such as the user's SIGTERM handler in a hung verification)."""
    if os.name == "posix":
        if grace > 0:
            _signal_group(process.pid, signal.SIGTERM)
            _signal_group(process.pid, signal.SIGCONT)
            deadline = time.monotonic() + grace
            while (process.poll() is None or _group_alive(process.pid)) and time.monotonic() < deadline:
                time.sleep(POLL_S / 5)
        _signal_group(process.pid, signal.SIGKILL)
    else:
        try:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False, timeout=REAP_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
    if process.poll() is None:
        try:
            process.kill()
        except OSError:
            pass
    if tag is not None:
        tag.kill_all()
    try:
        process.wait(timeout=REAP_S)
    except subprocess.TimeoutExpired:
        pass  # not reaped: Popen reaps it later, when it is asked


def end_workers(workers: Sequence[BaseProcess], grace: float = GRACE_S) -> None:
    """End ``multiprocessing`` workers (each alone: they share their parent's process group, so
    the terminal's signals reach them too) and reap them, through multiprocessing's own joins."""
    running = [worker for worker in workers if _worker_running(worker)]
    for worker in running:
        _call(worker.terminate)
    deadline = time.monotonic() + grace
    while any(_worker_running(worker) for worker in running) and time.monotonic() < deadline:
        time.sleep(POLL_S / 5)
    for worker in running:
        if _worker_running(worker):
            _call(worker.kill)
    deadline = time.monotonic() + REAP_S
    for worker in running:
        try:
            worker.join(timeout=max(deadline - time.monotonic(), 0))
        except (OSError, ValueError, AssertionError):  # closed, or not a child of this process
            pass


def _worker_running(worker: BaseProcess) -> bool:
    try:
        return worker.exitcode is None  # reads (and reaps) its exit status
    except ValueError:  # closed: long gone
        return False


def _call(method: Callable[[], None]) -> None:
    try:
        method()
    except (OSError, ValueError, AttributeError):  # gone, closed, or never started
        pass


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Whether the process group still has a running member. On Linux a zombie does not count:
    an orphan's waits for an init that may never reap it (in a container)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()  # after the name, which may hold anything
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
