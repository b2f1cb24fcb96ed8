"""The parent side of ``torchlint verify``: start the probe, watch it, kill it, read it.

The probe runs in a child process of the workspace's interpreter, in its own
session (process group), with a unique token in its environment (torchlint.processes).
A timeout or a cancellation ends the process group and, on Linux, every process whose
environment carries the token, so what the user's code started goes too, even after
``setsid()`` or a double fork. The request (protocol.ProbeRequest) goes to the probe and
the result (protocol.ProbeResult) comes back through files in a private temporary folder,
never through stdout, which the user's code may flood; stdout and stderr go to files
in that folder (only their tails are kept), so nothing ever waits for a pipe to close.
This module never imports torch.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

from .. import processes
from ..analysis.context import FileContext
from ..environments import CLI_HINT, RUN, choose_interpreter
from ..analysis.parsing import parse
from ..config import VerifyConfig
from ..files import display_path
from ..settings import DEFAULT_SETTINGS, DEVICES, SettingError, is_device, share
from .findings import place_issues
from .inputs import find_input_calls
from .protocol import Constructor, ImportTarget, InputShape, JsonObject, ProbeRequest, ProbeResult
from .report import CANCELLED, COMPLETED, ClassReport, ENDED, ERROR, Issue, TIMEOUT, VerifyReport
from .targets import ImportPlan, candidate_files, feeder_files, find_constructors, import_plan, top_level_names

PROBE = Path(__file__).resolve().with_name("probe.py")
TAIL_BYTES = 16 * 1024
OUTPUT_CAP = 8 * 1024 * 1024  # bytes of stdout/stderr on disk before the file is emptied (its tail kept)
TOKEN_VARIABLE = "TORCHLINT_VERIFY_TOKEN"
PROBE_FAILED = 70  # the probe's own exit status for a torchlint bug
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
    "ddp": "training %s under DistributedDataParallel (--ddp)",
}


WAIT_OUTCOMES = {processes.EXITED: COMPLETED, processes.TIMED_OUT: TIMEOUT, processes.CANCELLED: CANCELLED}


class VerifyError(ValueError):
    """Bad arguments to verify_file (shown to the user as a usage error)."""


class NothingToVerify(VerifyError):
    """The file defines no class at all (a script, a helper module): in a folder, not an error."""


# -- arguments ---------------------------------------------------------------------------------------

def parse_input_shapes(value: Union[None, str, Sequence[Union[str, Sequence[int]]]]) -> Optional[List[InputShape]]:
    """``"2,16;2,3,32,32"`` / ``["2,16", "2,8:long"]`` / ``[(2, 16)]`` -> [InputShape]."""
    if value is None:
        return None
    items: List[Union[str, Sequence[int]]] = [part for part in value.split(";")] if isinstance(value, str) \
        else list(value)
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
        shapes.append(InputShape(shape, dtype))
    return shapes or None


def parse_init_kwargs(value: Union[None, str, JsonObject]) -> Optional[JsonObject]:
    """A JSON object (``'{"dim": 16}'``), or Python keyword arguments of literals (``dim=16, depth=2``)."""
    if value is None or isinstance(value, dict):
        return value
    text = value.strip()
    if not text.startswith(("{", "[")):
        return parse_python_kwargs(text)
    try:
        parsed = json.loads(text)
    except ValueError as err:
        raise VerifyError("--init-kwargs is not valid JSON: %s" % err) from None
    if not isinstance(parsed, dict):
        raise VerifyError("--init-kwargs must be a JSON object, like '{\"dim\": 16}', or dim=16")
    return parsed


def parse_python_kwargs(text: str) -> JsonObject:
    """``dim=64, depth=2, dims=(1, 2)`` -> a dict, reading each value with ast.literal_eval:
    never evaluated (the server must not run the user's text)."""
    if not text.strip():
        return {}
    try:
        call = ast.parse("dict(%s)" % text, mode="eval").body
    except SyntaxError:
        raise VerifyError("constructor arguments are keyword arguments of literals, like dim=64, depth=2 "
                          "(got %r)" % text) from None
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise VerifyError("constructor arguments are keyword arguments of literals, like dim=64, depth=2 "
                          "(got %r)" % text)
    kwargs: JsonObject = {}
    for keyword in call.keywords:
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise VerifyError("%s=%s is not a Python literal (numbers, strings, True/False/None, lists, tuples, "
                              "dicts)" % (keyword.arg, ast.unparse(keyword.value))) from None
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise VerifyError("%s=%s cannot be sent to the child (sets, bytes and complex numbers cannot)" % (
                keyword.arg, ast.unparse(keyword.value))) from None
        kwargs[cast(str, keyword.arg)] = value  # (no `**`: refused above)
    return kwargs


def parse_input_exprs(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    """``--input`` expressions, checked for syntax here (the child evaluates them, with torch)."""
    if not values:
        return None
    exprs = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise VerifyError("an --input is a Python expression, like 'torch.randint(0, 100, (2, 16))'")
        try:
            ast.parse(value.strip(), mode="eval")
        except SyntaxError as err:
            raise VerifyError("--input %r is not a Python expression: %s" % (value, err.msg)) from None
        exprs.append(value.strip())
    return exprs


def configured_inputs(verify_config: VerifyConfig) -> Dict[str, JsonObject]:
    """Per class, the inputs ``[tool.torchlint.verify.classes.<Class>]`` gives forward, as the
    request carries them (probe.input_candidates): ``{"shapes": [...]}`` or ``{"exprs": [...]}``."""
    found: Dict[str, JsonObject] = {}
    for name, recipe in verify_config.classes:
        where = "[tool.torchlint.verify.classes.%s]" % name
        try:
            shapes = parse_input_shapes(list(recipe.input_shapes)) if recipe.input_shapes else None
            exprs = parse_input_exprs(list(recipe.inputs)) if recipe.inputs else None
        except VerifyError as err:
            raise VerifyError("%s: %s" % (where, err)) from None
        if shapes:
            found[name] = {"shapes": [shape.to_dict() for shape in shapes]}
        elif exprs:
            found[name] = {"exprs": exprs}
    return found


def split_target(target: str) -> Tuple[str, Optional[str]]:
    """``FILE::Class`` -> (FILE, Class); ``FILE`` -> (FILE, None)."""
    path, sep, name = target.rpartition("::")
    if sep and name.isidentifier():
        return path, name
    return target, None


def resolve_python(python: Optional[str], configured: Optional[str] = None,
                   config_file: Optional["os.PathLike[str]"] = None, trust_workspace: bool = False,
                   hint: str = CLI_HINT, warn: Optional[Callable[[str], Any]] = None) -> str:
    """The interpreter verification runs: ``python`` (the user's choice), else the shared
    choice (torchlint.environments); a repository-named one only with ``trust_workspace``.
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

class _Output:
    """The child's stdout or stderr: a file in the private folder, never a pipe.

    A pipe would make the parent wait for every process holding its write end (a daemon the
    user's code left behind keeps it open forever). The file is opened for appending, so when
    it grows past OUTPUT_CAP its tail is kept in memory and the file is emptied in place."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handle = open(path, "ab")
        self._kept = b""

    def trim(self) -> None:
        try:
            if os.fstat(self.handle.fileno()).st_size <= OUTPUT_CAP:
                return
            self._kept = self._read_tail()
            os.truncate(self.path, 0)
        except OSError:
            pass

    def _read_tail(self) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - TAIL_BYTES, 0))
            return handle.read(TAIL_BYTES)

    def text(self) -> str:
        try:
            tail = self._read_tail()
        except OSError:
            tail = b""
        return (self._kept + tail)[-TAIL_BYTES:].decode("utf-8", "replace")

    def close(self) -> None:
        self.handle.close()


def _ask_for_stack(process: "subprocess.Popen[bytes]", stack_path: str) -> None:
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


def _class_names(path: str, class_name: Optional[str]) -> List[str]:
    """The classes whose constructor arguments to look for: the file's Modules, the one asked
    first (the others may build and feed it: probe.feed). A class whose base the file cannot
    show to be an nn.Module (`from .parts import *` brings `nn`) is looked for too: the child
    knows which classes are Modules."""
    names: List[str] = []
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        tree, _ = parse(text, path)
        if tree is not None:
            names = [info.name for info in FileContext(text, path, tree).module_classes]
            names += [node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.name not in names]
    except OSError:
        pass
    return [class_name] + [name for name in names if name != class_name] if class_name else names


def _from_the_code(path: str, class_name: Optional[str], plan: ImportPlan, workspace_root: Optional[str],
                   verify_config: Optional[VerifyConfig]
                   ) -> Tuple[Dict[str, List[Constructor]], Dict[str, List[JsonObject]], List[JsonObject]]:
    """(constructors, input calls) per class, read from the project's code: one scan for both;
    and the other files whose classes build this file's (feeders, with their own constructors
    and input calls)."""
    names = _class_names(path, class_name)
    try:
        sites = candidate_files(path, plan, workspace_root)
    except Exception:  # noqa: BLE001 - finding call sites is a help: never a reason not to verify
        sites = []
    feeders: List[JsonObject] = []
    try:
        for feeder_path, feeder_module in feeder_files(path, names, plan, sites):
            feeder_plan = import_plan(feeder_path, workspace_root, verify_config.import_roots if verify_config else (),
                                      verify_config.extra_paths if verify_config else ())
            feeder_names = _class_names(feeder_path, None)
            if feeder_plan.module != feeder_module or not feeder_names:
                continue
            built = find_constructors(feeder_path, feeder_names, feeder_plan, workspace_root, verify_config,
                                      sites=sites)
            calls = find_input_calls(feeder_path, feeder_names, feeder_plan, workspace_root, sites=sites)
            feeders.append({"path": os.path.abspath(feeder_path), "module": feeder_module, "classes": feeder_names,
                            "constructors": built, "input_calls": calls})
    except Exception:  # noqa: BLE001 - a parent elsewhere is a help: never a reason not to verify
        pass
    try:
        constructors = find_constructors(path, names, plan, workspace_root, verify_config, sites=sites)
    except Exception:  # noqa: BLE001
        constructors = {}  # the child still tries the user's arguments and the defaults
    try:
        calls = find_input_calls(path, names, plan, workspace_root, sites=sites)
    except Exception:  # noqa: BLE001 - the child still works inputs out from the module
        calls = {}
    return {name: [Constructor.from_dict(c) for c in found] for name, found in constructors.items()}, calls, feeders


# -- what can be said before torch starts -------------------------------------------------------------

MAX_FOLDER_FILES = 300  # files a folder's hint reads
_CLASS_LINE = re.compile(r"^class\s+(\w+)\s*\(([^)]*)\)", re.M)


def preflight(path: str, class_name: Optional[str]) -> None:
    """Raise VerifyError, saying what to do, for what needs no child to find out: a folder, a
    missing file, a class the file does not have, a file that defines no class."""
    shown = display_path(path)
    if os.path.isdir(path):
        raise VerifyError("%s is a folder: verify runs the nn.Module classes of one Python file (torchlint verify "
                          "FILE or FILE::Class)%s" % (shown, _module_files_hint(path)))
    if not os.path.exists(path):
        raise VerifyError("no such file: %s" % shown)
    if not os.path.isfile(path):
        raise VerifyError("%s is not a file: verify takes a Python file (torchlint verify FILE or FILE::Class)" % shown)
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError as err:
        raise VerifyError("cannot read %s: %s" % (shown, err.strerror or err)) from None
    tree, _ = parse(text, path)
    if tree is None:
        return  # a syntax error: the child reports it as TL905, on its line
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    modules = [info.name for info in FileContext(text, path, tree).module_classes]
    if class_name:
        if class_name in top_level_names(tree):
            return  # defined or imported there: the child sees whether it is an nn.Module
        if modules:
            hint = "its nn.Module classes: %s (torchlint verify %s::%s)" % (", ".join(modules), shown, modules[0])
        elif classes:
            hint = "it defines %s, none of them an nn.Module subclass that torchlint can see" % ", ".join(
                node.name for node in classes)
        else:
            hint = "it defines no class"
        raise VerifyError("no class %s in %s: %s" % (class_name, shown, hint))
    if not classes:
        raise NothingToVerify("%s defines no class, so there is nothing to verify: verify runs the nn.Module classes a "
                          "file defines; give the file that defines your model (torchlint verify FILE or "
                          "FILE::Class)" % shown)


def _module_files_hint(folder: str) -> str:
    """``: files there that define nn.Module classes: a.py (Net), ...`` (a cheap text scan)."""
    found: List[str] = []
    seen = 0
    for directory, subdirs, files in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in ("__pycache__", "node_modules"))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > MAX_FOLDER_FILES or len(found) >= 5:
                break
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    text = handle.read(1_000_000).decode("utf-8", "replace")
            except OSError:
                continue
            names = [m.group(1) for m in _CLASS_LINE.finditer(text) if "Module" in m.group(2) or "nn." in m.group(2)]
            if names:
                found.append("%s (%s)" % (display_path(os.path.join(directory, name)), ", ".join(names[:3])))
        if seen > MAX_FOLDER_FILES or len(found) >= 5:
            break
    if not found:
        return "; no file there seems to define one"
    return "; files there that define nn.Module classes: %s, e.g. torchlint verify %s" % (
        "; ".join(found), found[0].split(" (")[0])


def verify_file(path: str, class_name: Optional[str] = None, device: str = DEFAULT_SETTINGS.verify_device,
                timeout: float = DEFAULT_SETTINGS.verify_timeout, init_kwargs: Union[None, str, JsonObject] = None,
                input_shapes: Union[None, str, Sequence[Union[str, Sequence[int]]]] = None,
                python: Optional[str] = None,
                cancel_event: Optional[threading.Event] = None, cwd: Optional[str] = None,
                input_exprs: Optional[Sequence[str]] = None, workspace_root: Optional[str] = None,
                verify_config: Optional[VerifyConfig] = None, ddp: bool = False,
                memory_share: float = DEFAULT_SETTINGS.verify_memory_share) -> VerifyReport:
    """Run the file's nn.Module(s) in a child process and report what happened.

    The file is imported as a module of its package when it is in one (``targets.import_plan``),
    and classes that need constructor arguments get the call sites and factories the project
    has (``targets.find_constructors``), after ``init_kwargs``. ``workspace_root``: the project
    (default: ``cwd``); ``verify_config``: its ``[tool.torchlint.verify]``; ``ddp``: also two
    training steps under DistributedDataParallel in a 2-process gloo group on the CPU (TL908);
    ``memory_share``: of the machine's memory, what a CPU run may allocate (1: no bound).

    Raises VerifyError for bad arguments (bad JSON, bad shapes, bad device, a configured import
    root that does not exist, no interpreter) and for what the file says before torch starts
    (no such file, a folder, a class the file does not have, a file without a class), each
    message saying what to do; everything that goes
    wrong in the child is in the report, and every issue has a line.
    Setting ``cancel_event`` kills the child's process tree; the report says "cancelled".
    """
    started = time.monotonic()
    path = os.path.abspath(path)
    init_kwargs, shapes = parse_init_kwargs(init_kwargs), parse_input_shapes(input_shapes)  # usage errors first
    input_exprs = parse_input_exprs(input_exprs)
    verify_config = verify_config or VerifyConfig()
    _check_usage(device, timeout, verify_config, memory_share)
    preflight(path, class_name)  # then what the file says, all before torch starts
    python = resolve_python(python)
    workspace_root = workspace_root or cwd
    plan = import_plan(path, workspace_root, verify_config.import_roots, verify_config.extra_paths)
    constructors, input_calls, feeders = _from_the_code(path, class_name, plan, workspace_root, verify_config)
    class_inputs = configured_inputs(verify_config)
    report = VerifyReport(path=path, python=python)
    folder = tempfile.mkdtemp(prefix="torchlint-verify-")
    try:
        request = ProbeRequest(
            path=path, result_path=os.path.join(folder, "result.json"), stack_path=os.path.join(folder, "stack.txt"),
            deadline=time.time() + max(timeout - (time.monotonic() - started), 0.1), class_name=class_name,
            device=device, init_kwargs=init_kwargs, input_shapes=shapes, input_exprs=input_exprs,
            import_target=ImportTarget(plan.module, plan.root) if plan.module else None,
            extra_paths=list(plan.extra_paths), constructors=constructors, input_calls=input_calls,
            class_inputs=class_inputs, feeders=feeders, ddp=ddp, memory_share=memory_share)
        _run_probe(report, request, folder, cwd, started + timeout, timeout, cancel_event)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        report.duration_s = time.monotonic() - started
    return report


def _check_usage(device: str, timeout: float, verify_config: VerifyConfig, memory_share: float) -> None:
    """VerifyError for a device, timeout, memory share or configured folder that cannot be used."""
    if not isinstance(device, str) or not is_device(device):
        raise VerifyError("unknown device %r (use %s or cuda:N)" % (device, ", ".join(DEVICES)))
    if not timeout or not 0 < timeout < float("inf"):  # NaN or infinity: a wait without a bound
        raise VerifyError("the timeout must be a positive number of seconds")
    try:
        share(memory_share)
    except SettingError as err:
        raise VerifyError("the memory share: %s" % err) from None
    for folder in verify_config.import_roots + verify_config.extra_paths:
        if not os.path.isdir(folder):
            raise VerifyError("[tool.torchlint.verify]: %s is not a folder" % folder)


def _run_probe(report: VerifyReport, request: ProbeRequest, folder: str, cwd: Optional[str], deadline: float,
               timeout: float, cancel_event: Optional[threading.Event]) -> None:
    """The probe run on ``request`` (written in ``folder``, its outputs there too) until it ends,
    ``deadline`` (monotonic) or ``cancel_event``; its exit, its outputs' tails, its result and
    their issues' places go into ``report``."""
    tag = processes.Tag(TOKEN_VARIABLE, uuid.uuid4().hex)  # inherited by everything the child starts
    request_path = os.path.join(folder, "request.json")
    with open(request_path, "w", encoding="utf-8") as handle:
        handle.write(request.to_json())
    stdout, stderr = _Output(os.path.join(folder, "stdout")), _Output(os.path.join(folder, "stderr"))
    try:
        try:
            process = processes.start([report.python, str(PROBE), request_path], env=_child_env(), tag=tag, cwd=cwd,
                                      stdin=subprocess.DEVNULL, stdout=stdout.handle, stderr=stderr.handle)
        except OSError as err:
            report.outcome, report.error = ERROR, "cannot run %s: %s" % (report.python, err.strerror or err)
            return
        outcome = _wait_and_end(process, tag, request.stack_path, deadline, cancel_event, (stdout, stderr))
    finally:
        stdout.close()
        stderr.close()
    report.exit_code = process.returncode
    report.stdout_tail, report.stderr_tail = stdout.text(), stderr.text()
    try:
        _read_result(report, request, outcome, timeout)
    except Exception as err:  # noqa: BLE001 - a result the parent cannot make sense of is a report too
        _garbage(report, "the probe's result could not be read (%s: %s)" % (type(err).__name__, err))
    place_issues(report)


def _wait_and_end(process: "subprocess.Popen[bytes]", tag: processes.Tag, stack_path: str, deadline: float,
                  cancel_event: Optional[threading.Event], outputs: Sequence[_Output]) -> str:
    """How the child's run ended (COMPLETED, TIMEOUT or CANCELLED), its ``outputs`` trimmed while it
    runs and a hung child's stack asked for; then the child ended, and what it left running."""
    outcome = None

    def trim_outputs() -> None:
        for output in outputs:
            output.trim()

    try:
        outcome = WAIT_OUTCOMES[processes.wait(
            process, deadline, cancelled=cancel_event.is_set if cancel_event is not None else None,
            every=trim_outputs)]
        if outcome == TIMEOUT:
            _ask_for_stack(process, stack_path)
    finally:
        # Also on Ctrl-C in the parent: the child has its own session, so the terminal's
        # SIGINT never reaches it. Also after a normal exit: what it left running goes too,
        # with the grace. A hung or cancelled probe gets none: the user's SIGTERM handler
        # would run on and rewrite the result.
        processes.end(process, grace=processes.GRACE_S if outcome == COMPLETED else 0, tag=tag)
    return outcome


# -- reading what the child left ------------------------------------------------------------------

def _load(path: str) -> Optional[ProbeResult]:
    """What the probe last wrote; None when it wrote nothing usable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return ProbeResult.from_json(handle.read())
    except (OSError, ValueError, RecursionError):
        return None


def _garbage(report: VerifyReport, message: str) -> None:
    report.outcome, report.error, report.error_kind = ERROR, message, "probe"
    report.classes, report.file_issues = [], []


def _read_result(report: VerifyReport, request: ProbeRequest, outcome: str, timeout: float) -> None:
    result = _load(request.result_path)
    if result is not None:
        report.torch_version, report.device = result.torch_version, result.device
        report.device_name, report.device_note = result.device_name, result.device_note
        report.classes = [ClassReport.from_dict(c) for c in result.classes]
        report.file_issues = [Issue.from_dict(i) for i in result.file_issues]
        if result.error is not None:
            report.outcome, report.error_kind, report.error = ERROR, result.error.kind, result.error.message
            if result.error.kind == "no_torch":
                report.error += "; install torch there, or pick the interpreter with --python"
            return
    if outcome == COMPLETED and result is not None and result.finished:
        return

    phase = result.phase if result is not None else "start"
    current = result.current_class if result is not None else None
    doing = PHASES.get(phase, phase)
    doing = doing % current if "%s" in doing else doing
    if outcome == COMPLETED and report.exit_code == PROBE_FAILED:
        # The probe's own last resort: a torchlint bug (or user code that broke the probe itself).
        report.outcome, report.error_kind = ERROR, "probe"
        report.error = ("verification stopped on an internal error while %s%s; what was verified before is "
                        "reported (please report this with the stderr below)" % (
                            doing, _last_line(report.stderr_tail)))
        return
    if outcome == CANCELLED:
        report.outcome, report.error = CANCELLED, "cancelled while %s; the process tree was killed" % doing
        return
    if result is None or phase in ("start", "torch"):
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
    line, function = _stack_line(request.stack_path, request.path)
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


def _stack_line(stack_path: str, user_path: str) -> Tuple[Optional[int], Optional[str]]:
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
    best: Tuple[Optional[int], Optional[str]] = (None, None)
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
