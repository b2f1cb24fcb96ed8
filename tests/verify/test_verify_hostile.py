"""TL905 and hostile code: whatever the module's code does, torchlint survives and reports it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from torchlint.verify import VerifyError, report_to_findings, verify_file
from torchlint.verify.report import CANCELLED, COMPLETED, ENDED, ERROR, TIMEOUT

from verify_helpers import check, class_report, cuda_available, issues, line_of, torch_python, write_module

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and signals are POSIX here")

FAILURES = '''
import sys

import torch
import torch.nn as nn


class RaisesKeyError(nn.Module):
    def __init__(self):
        super().__init__()
        config = {"width": 4}
        self.dim = config["dim"]


class ExitsInInit(nn.Module):
    def __init__(self):
        super().__init__()
        sys.exit(3)


class BadForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) @ torch.ones(5, 5)

    def torchlint_example_inputs(self):
        return torch.randn(2, 4)


class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(20000):
            print("constructing, step", i)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        print("forward says hi")
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def failures(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("failures"), "failures.py", FAILURES)
    report = verify_file(str(path), python=torch_python())
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    return path, report


def test_exception_in_construction_points_at_the_line(failures):
    path, report = failures
    (issue,) = issues(report, "TL905", "RaisesKeyError")
    assert issue.line == line_of(path, 'self.dim = config["dim"]')
    assert "constructing RaisesKeyError()" in issue.message and "KeyError: 'dim'" in issue.message
    assert "Traceback" in issue.detail
    assert class_report(report, "RaisesKeyError").status == "failed"


def test_sys_exit_in_construction_is_caught(failures):
    path, report = failures
    (issue,) = issues(report, "TL905", "ExitsInInit")
    assert "sys.exit(3)" in issue.message and issue.line == line_of(path, "sys.exit(3)")


def test_failing_forward_with_given_inputs_is_the_module_s_bug(failures):
    path, report = failures
    (issue,) = issues(report, "TL905", "BadForward")
    assert "BadForward.forward failed" in issue.message and "RuntimeError" in issue.message
    assert issue.line == line_of(path, "@ torch.ones(5, 5)")
    findings = report_to_findings(report, path.read_text(), str(path))
    assert ("TL905", issue.line) in {(f.code, f.range.start.line) for f in findings}


def test_printing_to_stdout_does_not_disturb_the_result(failures):
    _, report = failures
    cls = class_report(report, "Chatty")
    assert cls.status == "verified" and cls.issues == []
    assert check(cls, "TL903").status == "passed"
    assert "forward says hi" in report.stdout_tail
    assert len(report.stdout_tail) <= 16 * 1024  # only the tail is kept


# A file without a class is refused before torch starts (nothing to verify): the files below
# hold one, after the code whose behaviour they are about.
A_MODULE = '''

import torch.nn


class Net(torch.nn.Module):
    pass
'''


def test_exception_at_import(tmp_path):
    path = write_module(tmp_path, "broken_import.py", textwrap.dedent('''
        import torch
        SETTINGS = {}
        WIDTH = SETTINGS["width"]
    ''') + A_MODULE)
    report = verify_file(str(path), python=torch_python())
    (issue,) = report.file_issues
    assert issue.code == "TL905" and issue.line == 3
    assert "importing broken_import.py failed" in issue.message and "KeyError" in issue.message
    (finding,) = report_to_findings(report, path.read_text(), str(path))
    assert finding.range.start.line == 3


def test_sys_exit_at_import(tmp_path):
    path = write_module(tmp_path, "exits.py", textwrap.dedent('''
        import sys
        sys.exit(3)
    ''') + A_MODULE)
    report = verify_file(str(path), python=torch_python())
    (issue,) = report.file_issues
    assert "sys.exit(3)" in issue.message and issue.line == 2


@posix_only
def test_os_exit_ends_the_process_before_the_result(tmp_path):
    path = write_module(tmp_path, "quits.py", '''
        import os
        import torch.nn as nn


        class Quits(nn.Module):
            def __init__(self):
                super().__init__()
                os._exit(0)
    ''')
    report = verify_file(str(path), python=torch_python())
    assert report.outcome == ENDED and report.exit_code == 0
    (issue,) = report.issues
    assert issue.code == "TL905" and issue.class_name == "Quits"
    assert "ended the process (exit code 0) before verification finished, while constructing Quits" in issue.message
    (finding,) = report_to_findings(report, path.read_text(), str(path))
    assert finding.range.start.line == line_of(path, "class Quits")  # no traceback: the class line


@posix_only
def test_abort_in_forward_is_reported_with_its_line(tmp_path):
    path = write_module(tmp_path, "aborts.py", '''
        import os
        import torch.nn as nn


        class Aborts(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                os.abort()
    ''')
    report = verify_file(str(path), python=torch_python())
    assert report.outcome == ENDED
    (issue,) = report.issues
    assert "killed by SIGABRT" in issue.message and "Aborts forward" in issue.message
    assert issue.line == line_of(path, "os.abort()")


@posix_only
def test_infinite_loop_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    path = write_module(tmp_path, "loops.py", '''
        import subprocess
        import sys
        import torch.nn as nn

        CHILD = "import time, pathlib\\nwhile True:\\n    pathlib.Path(%r).touch()\\n    time.sleep(0.1)\\n"


        class Loops(nn.Module):
            def __init__(self):
                super().__init__()
                subprocess.Popen([sys.executable, "-c", CHILD])
                while True:
                    pass
    ''' % str(marker))
    report = verify_file(str(path), python=torch_python(), timeout=20)
    assert report.outcome == TIMEOUT
    (issue,) = report.issues
    assert "timed out after 20s while constructing Loops" in issue.message
    loop = line_of(path, "        while True:")
    assert issue.line in (loop, loop + 1)  # the `while` or its `pass`, wherever the kill found it
    # The grandchild went down with the process group: the marker stops being touched.
    time.sleep(0.3)
    assert marker.exists()  # the grandchild did run
    if marker.exists():
        before = marker.stat().st_mtime
        time.sleep(0.5)
        assert marker.stat().st_mtime == before


@posix_only
def test_a_hung_module_s_sigterm_handler_never_runs(tmp_path):
    # A training script's graceful-shutdown handler: given a SIGTERM, it would end the hang and
    # let the probe carry on and rewrite the result. A hung probe is killed outright.
    marker = tmp_path / "handler-ran"
    path = write_module(tmp_path, "graceful.py", '''
        import signal
        import sys
        import torch.nn as nn


        def stop(signum, frame):
            open(%r, "w").close()
            sys.exit(0)


        signal.signal(signal.SIGTERM, stop)


        class Hangs(nn.Module):
            def __init__(self):
                super().__init__()
                while True:
                    pass
    ''' % str(marker))
    report = verify_file(str(path), python=torch_python(), timeout=20)
    assert report.outcome == TIMEOUT
    (issue,) = report.issues
    assert "while constructing Hangs" in issue.message  # the handler was in place when the kill came
    time.sleep(0.3)
    assert not marker.exists()


def test_cancellation_kills_the_run(tmp_path):
    path = write_module(tmp_path, "spins.py", textwrap.dedent('''
        while True:
            pass
    ''') + A_MODULE)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    report = verify_file(str(path), python=torch_python(), timeout=120, cancel_event=cancel)
    assert report.outcome == CANCELLED and "cancelled" in report.error


@posix_only
def test_interpreter_without_torch_gets_a_clear_message(tmp_path):
    no_site = tmp_path / "python-without-torch"
    no_site.write_text('#!/bin/sh\nexec "%s" -S "$@"\n' % sys.executable)  # -S: no site-packages, no torch
    no_site.chmod(0o755)
    path = write_module(tmp_path, "model.py", "import torch\n" + A_MODULE)
    report = verify_file(str(path), python=str(no_site))
    assert report.outcome == ERROR
    assert "torch cannot be imported" in report.error and "--python" in report.error


def test_cuda_asked_for(tmp_path):
    """On a CPU-only torch: a clear error; where there is a GPU: the run says it used it."""
    path = write_module(tmp_path, "model.py", "import torch\n" + A_MODULE)
    report = verify_file(str(path), python=torch_python(), device="cuda")
    if cuda_available():
        assert report.outcome == COMPLETED and report.device.startswith("cuda") and report.device_name
    else:
        assert report.outcome == ERROR and "torch.cuda.is_available() is False" in report.error


def test_bad_arguments_raise_verify_error(tmp_path):
    path = write_module(tmp_path, "model.py", "import torch\n" + A_MODULE)
    with pytest.raises(VerifyError, match="no such file"):
        verify_file(str(tmp_path / "missing.py"))
    with pytest.raises(VerifyError, match="JSON"):
        verify_file(str(path), init_kwargs="{dim: 3}")
    with pytest.raises(VerifyError, match="shape"):
        verify_file(str(path), input_shapes="2,a")
    with pytest.raises(VerifyError, match="device"):
        verify_file(str(path), device="tpu")
    with pytest.raises(VerifyError, match="not found"):
        verify_file(str(path), python=str(tmp_path / "no-python"))
    for timeout in (float("nan"), float("inf"), 0, -1):  # each run's wait has a bound
        with pytest.raises(VerifyError, match="timeout"):
            verify_file(str(path), timeout=timeout)


# -- children that try to outlive verify ------------------------------------------------------------

ESCAPES = '''
import os
import sys
import time

import torch.nn as nn

PIDS = %r


def record():
    with open(PIDS, "a") as handle:
        handle.write("%%d\\n" %% os.getpid())


def leave_the_session():
    """setsid() in a child: out of verify's process group, holding its stdout."""
    if os.fork() == 0:
        os.setsid()
        record()
        while True:
            time.sleep(0.05)


def double_fork():
    """The daemon recipe: the grandchild is orphaned (re-parented away from verify)."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            record()
            sys.stdout.write("a daemon holds stdout\\n")
            sys.stdout.flush()
            while True:
                time.sleep(0.05)
        os._exit(0)


def both_recorded():
    """Wait (bounded) until both escapers wrote their pid: a quick run must not end before they did."""
    for _ in range(400):
        if os.path.exists(PIDS) and len(open(PIDS).read().split()) >= 2:
            return
        time.sleep(0.05)


class Escapes(nn.Module):
    def __init__(self):
        super().__init__()
        leave_the_session()
        double_fork()
        both_recorded()
        self.fc = nn.Linear(4, 4)
%s
'''


def _pids(path):
    """The recorded pids, waiting (bounded) until both escapers wrote theirs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = [int(row) for row in path.read_text().split()] if path.exists() else []
        if len(pids) >= 2:
            return pids
        time.sleep(0.05)
    raise AssertionError("the escaping processes never started")


def _alive(pid):
    """Running, not a zombie waiting for a parent (outside the test's process tree) to reap it."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone(pids, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the token scan reads /proc (Linux)")


@linux_only
@pytest.mark.parametrize("ending", ["timeout", "completed"])
def test_setsid_and_double_fork_children_do_not_survive(tmp_path, ending):
    pids_file = tmp_path / "pids"
    hang = "\n        while True:\n            pass\n" if ending == "timeout" else ""
    path = write_module(tmp_path, "escapes.py", ESCAPES % (str(pids_file), hang))
    report = verify_file(str(path), python=torch_python(), device="cpu", timeout=20 if hang else 300)
    pids = _pids(pids_file)
    try:
        if ending == "timeout":
            assert report.outcome == TIMEOUT
        else:  # the results came through the result file although a daemon held stdout open
            # (Escapes has no forward: the gradient checks cannot run.)
            assert report.outcome == COMPLETED and class_report(report, "Escapes").status == "partly verified"
        assert _gone(pids), "still running: %s" % [p for p in pids if _alive(p)]
        assert not [pid for pid in pids if _token_of(pid)]
    finally:
        _kill_all(pids)  # never leave one behind, whatever failed above


def _kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _token_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return b"TORCHLINT_VERIFY_TOKEN=" in handle.read()
    except OSError:
        return False


HANGS_IN_FORWARD = '''import torch
from torch import nn


class Hangs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        while True:
            pass
'''


# Seconds to wait for the probe to start, then to end once its owner is gone. Not a speed check:
# the probe looks for its parent every 0.5 s, and without the watch it runs until the 600 s
# timeout; the bound only keeps a failure from holding the suite.
ORPHAN_DEADLINE = 120


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
def test_a_probe_whose_owner_was_killed_ends(tmp_path):
    """The run's owner SIGKILLed (a language server killed by its editor) while the user's code
    hangs: the probe does not run on for ever."""
    from test_hostile_files import descendants
    path = tmp_path / "hangs.py"
    path.write_text(HANGS_IN_FORWARD)
    owner = subprocess.Popen([sys.executable, "-m", "torchlint", "verify", str(path), "--device", "cpu",
                              "--timeout", "600", "--python", torch_python()],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    probes = []
    try:
        deadline = time.monotonic() + ORPHAN_DEADLINE
        while not probes and time.monotonic() < deadline:
            probes = [pid for pid in descendants(owner.pid) if b"probe.py" in _cmdline(pid)]
            time.sleep(0.1)
        assert probes, "the probe never started"
        owner.kill()
        owner.wait(30)
        assert _gone(probes, seconds=ORPHAN_DEADLINE), "the probe outlived its owner"
    finally:
        owner.kill()
        _kill_all(probes)


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""
