"""The parent side of ``torchlint verify``: start the probe, watch it, kill it, read it.

The probe runs in a child process of the workspace's interpreter, in its own
session (process group), so that a timeout or a cancellation can kill the whole
tree, including anything the user's code started. Its result comes back through a
file in a private temporary folder, never through stdout, which the user's code
may flood; stdout and stderr are drained by threads that keep only their tails.
This module never imports torch.
"""
from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from ..analysis.environments import CLI_HINT, RUN, choose_interpreter
from .report import CANCELLED, COMPLETED, ENDED, ERROR, TIMEOUT, ClassReport, Issue, VerifyReport

PROBE = Path(__file__).resolve().with_name("probe.py")
DEFAULT_TIMEOUT = 60.0
DEVICES = ("auto", "cuda", "cpu")
TAIL_BYTES = 16 * 1024
POLL_S = 0.05
STACK_WAIT_S = 0.5  # how long a hung child gets to write its stack before the kill

# --input-shape dtypes: `2,16` is float32; `2,8:long` gives integer indices (for nn.Embedding).
DTYPES = {"float": "float32", "float32": "float32", "float64": "float64", "double": "float64",
          "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
          "long": "int64", "int64": "int64", "int": "int64"}

PHASES = {
    "start": "starting the probe",
    "torch": "importing torch",
    "import": "importing the file",
    "construct": "constructing %s",
    "registration": "checking what %s registers",
    "move": "moving %s to the device",
    "inputs": "making example inputs for %s",
    "forward": "running %s forward and backward",
    "step": "taking an optimizer step on %s",
}


class VerifyError(ValueError):
    """Bad arguments to verify_file (shown to the user as a usage error)."""


# -- arguments ---------------------------------------------------------------------------------------

def parse_input_shapes(value: Union[None, str, Sequence]) -> Optional[List[dict]]:
    """``"2,16;2,3,32,32"`` / ``["2,16", "2,8:long"]`` / ``[(2, 16)]`` -> [{"shape", "dtype"}]."""
    if value is None:
        return None
    items: list = [part for part in value.split(";")] if isinstance(value, str) else list(value)
    shapes = []
    for item in items:
        if isinstance(item, str):
            text, _, dtype_name = item.strip().partition(":")
            dtype = DTYPES.get(dtype_name.strip().lower() or "float32")
            if dtype is None:
                raise VerifyError("unknown dtype %r in input shape %r (use one of: %s)" % (
                    dtype_name, item, ", ".join(sorted(DTYPES))))
            parts = [p for p in re.split(r"[,x\s]+", text.strip().strip("()[]")) if p]
        else:
            parts, dtype = list(item), "float32"
        try:
            shape = [int(p) for p in parts]
        except (TypeError, ValueError):
            raise VerifyError("an input shape is a list of sizes like 2,16 (got %r)" % (item,)) from None
        if not shape or any(size < 0 for size in shape):
            raise VerifyError("an input shape is a list of sizes like 2,16 (got %r)" % (item,))
        shapes.append({"shape": shape, "dtype": dtype})
    return shapes or None


def parse_init_kwargs(value: Union[None, str, dict]) -> Optional[dict]:
    if value is None or isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise VerifyError("--init-kwargs is not valid JSON: %s" % err) from None
    if not isinstance(parsed, dict):
        raise VerifyError("--init-kwargs must be a JSON object, like '{\"dim\": 16}'")
    return parsed


def split_target(target: str):
    """``FILE::Class`` -> (FILE, Class); ``FILE`` -> (FILE, None)."""
    path, sep, name = target.rpartition("::")
    if sep and name.isidentifier():
        return path, name
    return target, None


def resolve_python(python: Optional[str], configured: Optional[str] = None, config_file=None,
                   trust_workspace: bool = False, hint: str = CLI_HINT, warn=None) -> str:
    """The interpreter verification runs: ``python`` (the user's choice), else the shared
    choice (analysis.environments); a repository-named one only with ``trust_workspace``.
    ``warn`` gets what was passed over and why."""
    choice = choose_interpreter(explicit=python, configured=configured, config_file=config_file,
                                trust_workspace=trust_workspace, purpose=RUN, hint=hint)
    for message in choice.warnings:
        if warn is not None:
            warn(message)
    chosen = choice.interpreter.path
    if not os.path.exists(chosen):
        raise VerifyError("Python interpreter not found: %s" % (python or chosen))
    return chosen


# -- the child process ---------------------------------------------------------------------------------

class _Tail:
    """Drain a pipe in a thread, keeping only the last bytes (the user's code may print gigabytes)."""

    def __init__(self, stream):
        self._stream = stream
        self._chunks: collections.deque = collections.deque()
        self._size = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self):
        try:
            for chunk in iter(lambda: self._stream.read1(8192), b""):
                self._chunks.append(chunk)
                self._size += len(chunk)
                while self._size - len(self._chunks[0]) >= TAIL_BYTES:
                    self._size -= len(self._chunks.popleft())
        except (OSError, ValueError):
            pass

    def text(self, wait: float = 1.0) -> str:
        self._thread.join(wait)  # a process that escaped the kill may hold the pipe open: do not wait for it
        return b"".join(self._chunks)[-TAIL_BYTES:].decode("utf-8", "replace")


def _start(command: List[str], cwd: Optional[str], env: Dict[str, str]) -> subprocess.Popen:
    options: dict = {}
    if os.name == "posix":
        options["start_new_session"] = True  # its own process group: killpg reaches everything it starts
    else:
        options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, **options)


def kill_tree(process: subprocess.Popen) -> None:
    """Kill the child and everything in its process group (also after it exited: leftovers)."""
    if os.name == "posix":
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    try:
        process.kill()
    except OSError:
        pass


def _ask_for_stack(process: subprocess.Popen, stack_path: str) -> None:
    """Have the hung child's faulthandler write its Python stack (SIGUSR1), and give it a moment."""
    if not hasattr(signal, "SIGUSR1"):
        return  # the probe's own timer wrote it
    try:
        os.kill(process.pid, signal.SIGUSR1)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + STACK_WAIT_S
    size = -1
    while time.monotonic() < deadline:
        time.sleep(0.02)
        try:
            current = os.path.getsize(stack_path)
        except OSError:
            current = 0
        if current and current == size:
            return  # written, and no longer growing
        size = current


def _child_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # the stdout tail is complete even when the process is killed
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ in the user's project
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def verify_file(path: str, class_name: Optional[str] = None, device: str = "auto",
                timeout: float = DEFAULT_TIMEOUT, init_kwargs: Union[None, str, dict] = None,
                input_shapes: Union[None, str, Sequence] = None, python: Optional[str] = None,
                cancel_event: Optional[threading.Event] = None, cwd: Optional[str] = None) -> VerifyReport:
    """Run the file's nn.Module(s) in a child process and report what happened.

    Raises VerifyError for bad arguments (no such file, bad JSON, bad shapes, bad device,
    no interpreter); everything that goes wrong in the child is in the report.
    Setting ``cancel_event`` kills the child's process tree; the report says "cancelled".
    """
    started = time.monotonic()
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise VerifyError("no such file: %s" % path)
    if device not in DEVICES and not re.fullmatch(r"cuda:\d+", device or ""):
        raise VerifyError("unknown device %r (use auto, cuda, cuda:N or cpu)" % device)
    if not timeout or timeout <= 0:
        raise VerifyError("the timeout must be a positive number of seconds")
    python = resolve_python(python)
    request = {
        "path": path,
        "class_name": class_name,
        "device": device,
        "init_kwargs": parse_init_kwargs(init_kwargs),
        "input_shapes": parse_input_shapes(input_shapes),
        "deadline": time.time() + timeout,
    }
    report = VerifyReport(path=path, python=python)
    folder = tempfile.mkdtemp(prefix="torchlint-verify-")
    try:
        request["result_path"] = os.path.join(folder, "result.json")
        request["stack_path"] = os.path.join(folder, "stack.txt")
        request_path = os.path.join(folder, "request.json")
        with open(request_path, "w", encoding="utf-8") as handle:
            json.dump(request, handle)
        try:
            process = _start([python, str(PROBE), request_path], cwd, _child_env())
        except OSError as err:
            report.outcome, report.error = ERROR, "cannot run %s: %s" % (python, err.strerror or err)
            return report
        stdout, stderr = _Tail(process.stdout), _Tail(process.stderr)
        try:
            outcome = _wait(process, started + timeout, cancel_event)
            if outcome == TIMEOUT:
                _ask_for_stack(process, request["stack_path"])
        finally:
            # Also on Ctrl-C in the parent: the child has its own session, so the terminal's
            # SIGINT never reaches it.
            kill_tree(process)
            process.wait()
        report.exit_code = process.returncode
        report.stdout_tail, report.stderr_tail = stdout.text(), stderr.text()
        for stream in (process.stdout, process.stderr):
            stream.close()
        _read_result(report, request, outcome, timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        report.duration_s = time.monotonic() - started
    return report


def _wait(process: subprocess.Popen, deadline: float, cancel_event: Optional[threading.Event]) -> str:
    while True:
        try:
            process.wait(timeout=POLL_S)
            return COMPLETED
        except subprocess.TimeoutExpired:
            pass
        if cancel_event is not None and cancel_event.is_set():
            return CANCELLED
        if time.monotonic() >= deadline:
            return TIMEOUT


# -- reading what the child left ------------------------------------------------------------------

def _load(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _read_result(report: VerifyReport, request: dict, outcome: str, timeout: float) -> None:
    data = _load(request["result_path"])
    if data is not None:
        report.torch_version = data.get("torch_version")
        report.device = data.get("device")
        report.device_name = data.get("device_name")
        report.device_note = data.get("device_note") or ""
        report.classes = [ClassReport.from_dict(c) for c in data.get("classes") or []]
        report.file_issues = [Issue.from_dict(i) for i in data.get("file_issues") or []]
        error = data.get("error")
        if error:
            report.outcome, report.error = ERROR, str(error.get("message"))
            if error.get("kind") == "no_torch":
                report.error += "; install torch there, or pick the interpreter with --python"
            return
    if outcome == COMPLETED and data is not None and data.get("finished"):
        return

    phase = (data or {}).get("phase", "start")
    current = (data or {}).get("current_class")
    doing = PHASES.get(phase, phase)
    doing = doing % current if "%s" in doing else doing
    if outcome == CANCELLED:
        report.outcome, report.error = CANCELLED, "cancelled while %s; the process tree was killed" % doing
        return
    if data is None or phase in ("start", "torch"):
        # The module's code never ran: the interpreter or torch itself failed.
        report.outcome = TIMEOUT if outcome == TIMEOUT else ERROR
        report.error = ("%s timed out after %gs" % (doing, timeout) if outcome == TIMEOUT else
                        "the probe did not run with %s (%s, exit code %s)%s" % (
                            report.python, doing, report.exit_code, _last_line(report.stderr_tail)))
        return
    if outcome == TIMEOUT:
        report.outcome = TIMEOUT
        message = "timed out after %gs while %s; the process tree was killed" % (timeout, doing)
    else:
        report.outcome = ENDED
        message = "the module's code ended the process (%s) before verification finished, while %s" % (
            _exit_text(report.exit_code), doing)
    line, function = _stack_line(request["stack_path"], request["path"])
    if line:
        message += " (line %d%s)" % (line, ", in %s" % function if function and function != "<module>" else "")
    issue = Issue("TL905", message, "error", class_name=current, line=line)
    target = next((cls for cls in report.classes if cls.name == current), None)
    if target is not None:
        target.status = "failed"
        target.issues.append(issue)
    else:
        report.file_issues.append(issue)


def _exit_text(code: Optional[int]) -> str:
    if code is not None and code < 0:
        try:
            return "killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "killed by signal %d" % -code
    return "exit code %s" % code


def _last_line(text: str) -> str:
    rows = [row for row in text.strip().splitlines() if row.strip()]
    return ": %s" % rows[-1].strip() if rows else ""


_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<name>\S+)')


def _stack_line(stack_path: str, user_path: str):
    """The innermost frame in the user's file from faulthandler's dump (a hang or a fatal signal).

    The dump lists threads most recent call first; the main thread is the one that
    runs the probe, so its frames win over the user's other threads."""
    try:
        with open(stack_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None, None
    user = os.path.normcase(os.path.realpath(user_path))
    probe = os.path.normcase(str(PROBE))
    best = (None, None)
    for block in re.split(r"\n(?=(?:Current thread|Thread) )", text):
        frames = [m for m in (_FRAME.match(row) for row in block.splitlines()) if m]
        mine = [m for m in frames if os.path.normcase(os.path.realpath(m.group("file"))) == user]
        if not mine:
            continue
        found = (int(mine[0].group("line")), mine[0].group("name"))
        if any(os.path.normcase(os.path.realpath(m.group("file"))) == probe for m in frames):
            return found
        best = best if best[0] else found
    return best
