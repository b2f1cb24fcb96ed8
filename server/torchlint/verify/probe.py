"""The child side of ``torchlint verify``: runs the user's nn.Module for real.

This is the only torchlint code that imports torch (with its siblings
``probe_checks.py`` and ``probe_support.py``), and only inside the child process.
It is run by path (``python probe.py REQUEST.json``) with the workspace's
interpreter, where torchlint itself may not be installed, so it loads its siblings
by path and uses nothing but the standard library and torch.

The request (a ``protocol.ProbeRequest``, written by runner.py) says what to verify and
how; the result (a ``protocol.ProbeResult``) goes to its result_path, never to stdout (the
user's code may print anything there). It is rewritten after every phase with ``finished``
false, so that when the user's code ends the process (``os._exit``, ``os.abort``, a
segfault) or hangs until the parent kills it, the parent still knows how far verification
got. Python-level tracebacks of hangs and fatal signals go to ``stack_path`` through faulthandler.
Every issue carries "class" (the verified class), "attribute" (the dotted path from
it), "owner_class"/"owner_attribute"/"owner_file"/"owner_line" (the class whose
`self.<attr> = ...` stored it) and "line" (in the verified file; the parent may refine it).
"""
from __future__ import annotations

import ast
import copy
import faulthandler
import functools
import importlib
import importlib.util
import inspect
import linecache
import os
import re
import signal
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 runs this file as it is
    from types import CodeType, ModuleType, TracebackType
    from typing import Callable, Dict, List, Literal, Mapping, Optional, Set, Tuple, Type, TypeVar, Union

    import torch
    from torch import nn
    from torch.utils.hooks import RemovableHandle

    from . import probe_checks
    from .probe_support import Run
    from .protocol import Constructor, JsonObject, ProbeRequest

    _T = TypeVar("_T")
    # Example inputs of forward: (args, kwargs, how they were made, trusted: see input_candidates).
    Candidate = Tuple[Tuple[Any, ...], Dict[str, Any], str, bool]
    Device = torch.device  # (pick_device's parameter named torch is the module, untyped)

# Bound before any user code runs: user code may monkeypatch the modules.
_replace = os.replace
_exit = os._exit
_open = open
_RECURSION_LIMIT = sys.getrecursionlimit()

CHECK_NAMES = {
    "TL901": "registration",
    "TL902": "device move",
    "TL903": "gradients",
    "TL904": "optimizer step",
    "TL906": "parameters",
    "TL907": "checkpoint",
    "TL908": "DDP",
}
FACTORY_NAMES = ("torchlint_example_inputs", "example_inputs")
HOW_TO_GIVE_INPUTS = ("give --input-shape (e.g. 2,16) or --input expressions, or define torchlint_example_inputs() "
                      "on the class or example_inputs(module) in the file")
TRIED_WHAT_THE_CODE_SUGGESTS = "tried what the code suggests: "
HOW_TO_GIVE_ARGUMENTS = ("in the editor, the \"Verify\" lens above the class asks for them; on the command line, "
                         "give --init-kwargs '{%s}', or set kwargs = {...} or factory = \"pkg.mod:function\" "
                         "under [tool.torchlint.verify.classes.%s] in pyproject.toml")


def _load_sibling(name: str) -> ModuleType:
    """probe_support.py / probe_checks.py, by path: the child may not have torchlint installed."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("torchlint_" + name, path)
    assert spec is not None and spec.loader is not None  # (a .py file's)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:  # the modules _load_sibling loads, as mypy reads them
    from . import probe_support as support, protocol
else:
    support = _load_sibling("probe_support")
    protocol = _load_sibling("protocol")
UserError, run_user, failure_issue = support.UserError, support.run_user, support.failure_issue


# -- the result file ---------------------------------------------------------------------------

class Result:
    """The result file: ``data`` (a protocol.ProbeResult), written whole and renamed into place."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.data = protocol.ProbeResult(python=sys.version.split()[0], executable=sys.executable)

    def phase(self, phase: str, class_name: Optional[str] = None) -> None:
        self.data.phase = phase
        self.data.current_class = class_name
        self.save()

    def fail(self, kind: str, message: str) -> None:
        """Verification cannot run at all."""
        self.data.error = protocol.ProbeFailure(kind, message)

    def save(self) -> None:
        temporary = self.path + ".tmp"
        with _open(temporary, "w", encoding="utf-8") as handle:
            handle.write(self.data.to_json(default=support.safe_text))
        _replace(temporary, self.path)


# -- importing the user's module ------------------------------------------------------------------

def load_user_module(request: ProbeRequest) -> Tuple[ModuleType, str]:
    """(module, how): as a module of its package when the request says how, else by path."""
    path = request.path
    for folder in request.extra_paths:
        if folder not in sys.path:
            sys.path.append(folder)
    target = request.import_target
    if target is not None:
        name, root = target.module, target.root
        if root:
            sys.path[:] = [root] + [p for p in sys.path if p != root]
        module = importlib.import_module(name)
        if support.same_file(getattr(module, "__file__", None) or "", path):
            return module, name
        # Another module of that name was imported first (a name of the standard library?).
    return load_by_path(path), "path"


def load_by_path(path: str) -> ModuleType:
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
    name = "torchlint_verify_%s_%d" % (stem, os.getpid())
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import %s as a Python module" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


def module_classes(user_module: ModuleType, torch: ModuleType) -> List[type]:
    """The nn.Module subclasses defined in the file, in the order they are defined."""
    return [value for value in list(vars(user_module).values())
            if inspect.isclass(value) and issubclass(value, torch.nn.Module)
            and value.__module__ == user_module.__name__]


# -- constructing the class -----------------------------------------------------------------------

class Built:
    def __init__(self, model: nn.Module, origin: str, text: str, inputs: object = None,
                 fed: Optional[Call] = None, synthesized: Optional[Dict[str, Any]] = None) -> None:
        self.model = model
        self.constructed_with = {"origin": origin, "text": text}
        self.inputs = inputs  # example inputs a factory returned with the module
        self.fed = fed  # the parent's call that gave the instance and its inputs (Seen)
        self.synthesized = synthesized  # the arguments made up from its signature (probe_arguments)


SYNTHESIZED = "arguments made up from its signature"


def construct(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, seed: int = 0,
              synthesized: Optional[Dict[str, Any]] = None) -> Union[Built, str]:
    """A Built, or a str (why the class was skipped). Failures of user code raise UserError.
    ``seed``: torch's random seed while it is built (the checkpoint round trip builds another).
    ``synthesized``: build it with these made-up arguments (probe_arguments); a failure is a
    str, never a finding: the arguments were a guess."""
    import torch

    with support.Assignments(torch.nn.Module):  # which statements stored each attribute
        return _construct(cls, request, user_module, seed, synthesized)


def _construct(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, seed: int,
               synthesized: Optional[Dict[str, Any]]) -> Union[Built, str]:
    import torch

    name = cls.__name__
    user_path = request.path
    init_kwargs = request.init_kwargs
    candidates = request.constructors.get(name) or []
    if synthesized is not None:
        synthesized = {**_device_defaults(cls), **synthesized}
        text = "%s(%s)" % (name, _kwargs_text(synthesized))
        torch.manual_seed(seed)
        try:
            model = run_user("constructing " + text, name, user_path, cls, **synthesized)
        except UserError as failure:
            return "%s failed: %s" % (text, failure.error)
        return Built(model, SYNTHESIZED, text, synthesized=synthesized)
    if init_kwargs:
        try:
            inspect.signature(cls).bind(**init_kwargs)
        except TypeError as err:
            return "the --init-kwargs do not fit %s%s: %s" % (name, _signature(cls), err)
        except ValueError:
            pass  # no signature to read (a C-level __init__): just try
        text = "%s(%s)" % (name, _kwargs_text(init_kwargs))
        torch.manual_seed(seed)
        return Built(run_user("constructing " + text, name, user_path, cls, **init_kwargs), "--init-kwargs", text)
    configured = next((c for c in candidates if c.before_defaults), None)
    if configured is not None:
        built, _ = build_candidate(configured, cls, user_module, user_path, seed)  # the user's own: failures are TL905
        return built if isinstance(built, Built) else "%s (from %s)" % (built, configured.origin)
    guesses = [c for c in candidates if not c.before_defaults and not c.made_up]
    default_failure: Optional[support.UserError] = None
    needs_from: Optional[type] = None  # the base that *args / **kwargs reached without the arguments it needs
    if _binds_without_arguments(cls):
        torch.manual_seed(seed)
        local = _device_defaults(cls)  # (a default of device="cuda" on a machine without CUDA: the CPU)
        text = "%s(%s)" % (name, _kwargs_text(local))
        try:
            return Built(run_user("constructing " + text, name, user_path, cls, **local), "defaults", text)
        except UserError as failure:
            needs_from = _base_missing_arguments(cls, failure.exception)
            if needs_from is None:
                if not guesses:
                    raise
                default_failure = failure  # arguments found in the code may still build it
    tried: List[str] = []
    for candidate in guesses:
        try:
            built, text = build_candidate(candidate, cls, user_module, user_path, seed)
        except UserError as failure:
            tried.append("%s (%s) failed: %s" % (candidate.expression or candidate.factory, candidate.origin,
                                                 failure.error))
            continue
        if isinstance(built, Built):
            return built
        tried.append("%s (%s): %s" % (text, candidate.origin, built))
    if default_failure is not None:
        raise default_failure
    required = _required(needs_from or cls)
    example = ", ".join('"%s": ...' % arg for arg in required)
    passed_on = ", passed on to %s%s" % (needs_from.__name__, _signature(needs_from)) if needs_from else ""
    reason = "needs arguments %s%s: %s" % (_signature(cls), passed_on, HOW_TO_GIVE_ARGUMENTS % (example, name))
    if tried:
        reason += "; %s%s" % (TRIED_WHAT_THE_CODE_SUGGESTS, "; ".join(tried))
    return reason


def build_candidate(candidate: Constructor, cls: Type[nn.Module], user_module: ModuleType,
                    user_path: str, seed: int = 0) -> Tuple[Union[Built, str], str]:
    """(Built or the reason it is not usable, the text shown for it)."""
    import torch

    origin = candidate.origin
    torch.manual_seed(seed)
    if candidate.factory:
        text = candidate.factory
        value = run_user("building %s with %s (from %s)" % (cls.__name__, text, origin), cls.__name__, user_path,
                         _call_factory, text)
        model, inputs = _unpack_factory(value)
        if not isinstance(model, torch.nn.Module):
            return "%s returned %s, not an nn.Module" % (text, support.type_name(model)), text
        return Built(model, origin, text, inputs), text
    text = candidate.expression or ""
    namespace = dict(vars(user_module))
    value = run_user("constructing %s (from %s)" % (text, origin), cls.__name__, user_path,
                     lambda: eval(compile(text, "<constructor from %s>" % origin, "eval"), namespace))
    if not isinstance(value, cls):
        return "built %s, not a %s" % (support.type_name(value), cls.__name__), text
    return Built(value, origin, text), text


def _call_factory(text: str) -> object:
    module_name, _, attribute = text.partition(":")
    target: Any = importlib.import_module(module_name.strip())  # then the attribute named
    for part in attribute.strip().split("."):
        target = getattr(target, part)
    return target()


def _unpack_factory(value: object) -> Tuple[object, object]:
    """A module; (module, inputs) as a tuple or list; or {"model": ..., "inputs": ...}."""
    if isinstance(value, dict) and "model" in value:
        return value["model"], value.get("inputs")
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    return value, None


def _device_defaults(cls: type) -> Dict[str, Any]:
    """{parameter: "cpu"} for each constructor parameter named ``device`` (or ``*_device``) whose
    default names CUDA, on a machine without CUDA: built as the user would build it there
    (``UNet(device="cpu")``), not failing on the first tensor it makes."""
    import torch

    if torch.cuda.is_available():
        return {}
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: "cpu" for p in parameters if (p.name == "device" or p.name.endswith("_device"))
            and str(p.default).startswith("cuda") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _binds_without_arguments(cls: type) -> bool:
    try:
        inspect.signature(cls).bind()
        return True
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to read: just try


MISSING_ARGUMENTS = re.compile(r"(?:(?P<function>[\w.<>]+)\(\) )?missing \d+ required (?:positional|keyword-only) "
                               r"arguments?: ")


def _base_missing_arguments(cls: type, exc: Optional[BaseException]) -> Optional[type]:
    """The base class whose __init__ raised "missing required argument" because ``cls()``, built with
    no arguments, passed its *args / **kwargs on to it (ActNorm(Base): super().__init__(*args,
    **kwargs)): the class needs arguments, it did not crash. None for any other failure: a TypeError
    of another call, of a call that does not pass the arguments on, or raised inside a body."""
    if type(exc) is not TypeError:
        return None
    match = MISSING_ARGUMENTS.match(support.safe_text(exc))
    if match is None:
        return None
    try:
        mro = inspect.getmro(cls)
        # Every frame from the construction down must be an __init__ of cls or a base that takes
        # *args or **kwargs, the innermost one passing them on in the call that failed.
        frames = [(tb.tb_frame.f_code, tb) for tb in _traceback_frames(exc)]
        frames = [(code, tb) for code, tb in frames if not support.in_probe(code.co_filename)]
        forwarding = {getattr(vars(k).get("__init__"), "__code__", None): k for k in mro}
        if not frames or any(code not in forwarding or not code.co_flags & VARIABLE_ARGUMENTS for code, _ in frames):
            return None
        code, tb = frames[-1]
        if not _passes_variable_arguments(code, tb):
            return None
    except Exception:  # noqa: BLE001 - odd metaclasses, unreadable sources: a crash is a crash
        return None
    function = match.group("function") or "__init__"  # (Python 3.8 and 3.9 name no class)
    owner, _, method = function.rpartition(".")
    if method != "__init__":
        return None
    bases = [k for k in mro[1:] if "__init__" in vars(k) and (not owner or k.__qualname__ == owner)]
    return bases[0] if bases else None


VARIABLE_ARGUMENTS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _traceback_frames(exc: BaseException) -> List[TracebackType]:
    found: List[TracebackType] = []
    tb = exc.__traceback__
    while tb is not None and len(found) < 1000:
        found.append(tb)
        tb = tb.tb_next
    return found


def _passes_variable_arguments(code: CodeType, tb: TracebackType) -> bool:
    """Does the call on that traceback line spread the function's own *args or **kwargs?"""
    names: List[str] = []
    position = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & inspect.CO_VARARGS:
        names.append(r"(?<!\*)\*\s*" + re.escape(code.co_varnames[position]))
        position += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        names.append(r"\*\*\s*" + re.escape(code.co_varnames[position]))
    (summary,) = traceback.extract_tb(tb, limit=1)
    first = summary.lineno or tb.tb_lineno
    last = getattr(summary, "end_lineno", None) or first  # (Python 3.11+: the whole call)
    text = "".join(linecache.getline(code.co_filename, number) for number in range(first, last + 1))
    return any(re.search(name + r"\b", text) for name in names)


_PROBE_MODULE = re.compile(r"\btorchlint_verify_\w+?_\d+\.")
_OBJECT_REPR = re.compile(r"<(?:class|enum) '([\w.]+)'>|<(?:function|built-in function) ([\w.<>]+) at 0x[0-9a-f]+>")


def user_text(text: str) -> str:
    """Python's text for the user's objects as the user's code names them: no name of the module
    the probe loaded the file as (``torchlint_verify_flows_31700.MLP`` is ``MLP``), a class or a
    function by its name rather than ``<class '...'>``."""
    text = _OBJECT_REPR.sub(lambda match: match.group(1) or match.group(2), text)
    return _PROBE_MODULE.sub("", text)


def _signature(cls: type) -> str:
    try:
        return user_text(str(inspect.signature(cls)))
    except (TypeError, ValueError):
        return "(...)"


def _required(cls: type) -> List[str]:
    try:
        return [p.name for p in inspect.signature(cls).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    except (TypeError, ValueError):
        return []


def _kwargs_text(kwargs: Mapping[str, object]) -> str:
    text = ", ".join("%s=%s" % (key, user_text(support.safe_text(value, 40))) for key, value in kwargs.items())
    return text if len(text) < 80 else text[:77] + "..."


# -- example inputs -------------------------------------------------------------------------------

def _as_call_arguments(value: object) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (list, tuple)):
        return tuple(value), {}
    return (value,), {}


def _to_device(value: Any, device: torch.device, depth: int = 0) -> Any:  # (any nesting of inputs)
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if depth < 4 and isinstance(value, (list, tuple, dict)):  # (namedtuples, OrderedDicts: _rebuilt)
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        return _rebuilt(value, [(k, _to_device(v, device, depth + 1)) for k, v in items])
    return value


def _accepts_argument(function: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def _class_attribute(cls: type, name: str) -> object:
    try:
        return inspect.getattr_static(cls, name, None)
    except BaseException:  # noqa: B902 - odd metaclasses
        return None


def input_candidates(model: nn.Module, user_module: ModuleType, request: ProbeRequest, built: Built,
                     several_classes: bool, run: Run) -> List[Candidate]:
    """[(args, kwargs, description, trusted)], best first; [] with no way to make inputs.

    ``trusted``: the inputs were meant for this module, so a forward failure is the
    module's bug (TL905); guessed inputs that do not fit only skip the gradient checks."""
    import torch

    if TYPE_CHECKING:
        from . import probe_inputs as inputs
    else:
        inputs = sys.modules.get("torchlint_probe_inputs") or _load_sibling("probe_inputs")
    class_name = type(model).__name__
    fed = built.fed
    if fed is not None and fed.kwargs is not None:
        # What the parent's forward passed this very instance: before the user's inputs, meant for the top model.
        torch.manual_seed(0)
        args, kwargs, replaced = inputs.varied(fed.args, fed.kwargs)
        note = "; constant float inputs given random values" if replaced else ""
        return [(args, kwargs, "%s (from %s%s)" % (support.describe(args, kwargs), fed.where(), note), True)]
    shapes = request.input_shapes
    if shapes:
        args = tuple(torch.randint(0, 2, tuple(s.shape)) if s.dtype == "int64"
                     else torch.randn(*s.shape, dtype=getattr(torch, s.dtype)) for s in shapes)
        return [(args, {}, "%s (from --input-shape)" % support.describe(args, {}), True)]
    expressions = request.input_exprs
    if expressions:
        namespace = dict(vars(user_module))
        namespace.setdefault("torch", torch)
        torch.manual_seed(0)
        args = tuple(run("evaluating the --input expression %s" % text,
                         lambda text=text: eval(compile(text, "<--input>", "eval"), namespace))
                     for text in expressions)
        return [(args, {}, "%s (from --input)" % support.describe(args, {}), True)]
    configured = request.class_inputs.get(class_name)
    if configured:
        where = "[tool.torchlint.verify.classes.%s]" % class_name
        namespace = dict(vars(user_module))
        namespace.setdefault("torch", torch)
        torch.manual_seed(0)
        shaped = [protocol.InputShape.from_dict(s) for s in configured.get("shapes") or [] if isinstance(s, dict)]
        if shaped:
            args = tuple(torch.randint(0, 2, tuple(s.shape)) if s.dtype == "int64"
                         else torch.randn(*s.shape, dtype=getattr(torch, s.dtype)) for s in shaped)
            return [(args, {}, "%s (from input-shape in %s)" % (support.describe(args, {}), where), True)]
        texts = [text for text in configured.get("exprs") or [] if isinstance(text, str)]
        if texts:
            args = tuple(run("evaluating %s's input %s" % (where, text),
                             lambda text=text: eval(compile(text, "<%s inputs>" % where, "eval"), namespace))
                         for text in texts)
            return [(args, {}, "%s (from inputs in %s)" % (support.describe(args, {}), where), True)]
    return _module_inputs(model, user_module, request, built, several_classes, run)


def _module_inputs(model: nn.Module, user_module: ModuleType, request: ProbeRequest, built: Built,
                   several_classes: bool, run: Run) -> List[Candidate]:
    """input_candidates when nobody gave inputs: those the module's code offers (its construction's
    call, its own or its file's example inputs), else the guesses (_guessed_inputs)."""
    import torch

    class_name = type(model).__name__
    if built.inputs is not None:
        args, kwargs = _as_call_arguments(built.inputs)
        return [(args, kwargs, "%s (from %s)" % (support.describe(args, kwargs), built.constructed_with["text"]),
                 True)]
    if callable(_class_attribute(type(model), "torchlint_example_inputs")):
        # (callable, _class_attribute says; nn.Module.__getattr__'s type says a tensor or a module)
        value = run("%s.torchlint_example_inputs()" % class_name,
                    lambda: model.torchlint_example_inputs())  # type: ignore[operator]
        args, kwargs = _as_call_arguments(value)
        return [(args, kwargs, "%s (from %s.torchlint_example_inputs)" % (
            support.describe(args, kwargs), class_name), True)]
    lightning = run("reading %s.example_input_array" % class_name,
                    lambda: getattr(model, "example_input_array", None))
    if isinstance(lightning, (torch.Tensor, tuple, list, dict)):
        args, kwargs = _as_call_arguments(lightning)
        return [(args, kwargs, "%s (from example_input_array)" % support.describe(args, kwargs), True)]
    for name in FACTORY_NAMES:
        factory = vars(user_module).get(name)
        if callable(factory) and not inspect.isclass(factory):
            takes_module = _accepts_argument(factory)
            value = run("%s()" % name, factory, model) if takes_module else run("%s()" % name, factory)
            if value is None:
                return []
            args, kwargs = _as_call_arguments(value)
            # A factory without a parameter cannot know which class it serves.
            trusted = takes_module or not several_classes
            return [(args, kwargs, "%s (from %s())" % (support.describe(args, kwargs), name), trusted)]
    return _guessed_inputs(model, request, built)


def _guessed_inputs(model: nn.Module, request: ProbeRequest, built: Built) -> List[Candidate]:
    """input_candidates when nothing offers inputs: the project's calls of the class (trusted when
    the call's object was built the way this one was), then what forward's code and the built
    layers suggest."""
    if TYPE_CHECKING:
        from . import probe_inputs as inputs
    else:
        inputs = sys.modules.get("torchlint_probe_inputs") or _load_sibling("probe_inputs")
    class_name = type(model).__name__
    found = [(args, kwargs, description, matches) for args, kwargs, description, matches in inputs.code_inputs(
        request.input_calls.get(class_name), built.constructed_with["text"])]
    # Both read forward's source and the built layers (no user code runs); what they cannot
    # read is a limit of torchlint's, never the module's bug.
    try:
        found += [(args, kwargs, description, False) for args, kwargs, description in inputs.dataflow_inputs(model)]
    except Exception:  # noqa: BLE001
        pass
    try:
        signature = inputs.forward_signature(model)
        required = signature[1] if signature is not None else 1
        tried: Set[Tuple[Tuple[int, ...], Optional[str]]] = set()
        for args, _, _, _ in found:
            tried |= inputs.shapes_of(args)
        found += [(args, kwargs, description, False)
                  for args, kwargs, description in inputs.candidate_inputs(model, required, tried)]
    except Exception:  # noqa: BLE001
        pass
    return found


# -- verifying one class --------------------------------------------------------------------------

def check_entry(code: str, status: str, summary: str) -> JsonObject:
    return {"code": code, "name": CHECK_NAMES[code], "status": status, "summary": summary}


def skip_gradients(report: JsonObject, reason: str, short: str, ddp: bool = False) -> None:
    """The checks that need forward did not run: the class is partly verified, never "verified".
    ``ddp``: --ddp was asked for, so TL908 is one of them."""
    codes = ("TL903", "TL904", "TL906", "TL907") + (("TL908",) if ddp else ())
    report["checks"] += [check_entry(code, "skipped", reason) for code in codes]
    report["status"] = "partly verified"
    report["partial_reason"] = "gradients skipped: %s" % short


def verify_class(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, result: Result,
                 report: JsonObject, baseline: Set[str], device: torch.device, several_classes: bool,
                 seen: Optional[Seen] = None, again: bool = False, fed: Optional[Call] = None,
                 synthesized: Optional[Dict[str, Any]] = None) -> None:
    """``seen``: records the instances and inputs other classes of the file get from this one's
    forward (Seen); ``again``: the inputs it recorded for this class, from another class's
    forward, are tried first; ``fed``: verify the instance that call recorded, on its inputs,
    instead of building one; ``synthesized``: build it with these made-up arguments."""
    import torch

    if TYPE_CHECKING:
        checks = probe_checks
    else:
        checks = sys.modules["torchlint_probe_checks"]
    name = cls.__name__
    user_path = request.path
    issues = report["issues"]
    forward = "%s.forward" % name

    def run(doing: str, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return run_user(forward if doing == "forward" else doing, name, user_path, function, *args, **kwargs)

    def state_of(model: nn.Module) -> probe_checks.State:
        return checks.State(model, baseline, cls, user_path)

    def add(code: str, found: List[JsonObject], summary: str) -> None:
        found = [issue for issue in found if not _injected(issue, fed)]
        issues.extend(found)
        report["checks"].append(check_entry(code, checks.check_status(found), summary))

    if fed is not None and fed.instance is not None:
        built: Union[Built, str] = Built(fed.instance, "%s.forward" % fed.caller, fed.built_as(), fed=fed)
        report["built_by"] = fed.caller
    else:
        result.phase("construct", name)
        built = construct(cls, request, user_module, synthesized=synthesized)
    if not isinstance(built, Built):
        report["status"], report["skip_reason"] = "skipped", built
        if _needs_arguments(report):
            report["table_entry"] = _table_entry(cls)
        return
    model = built.model
    report["constructed_with"] = built.constructed_with

    result.phase("registration", name)
    state = state_of(model)
    found = [issue for issue in checks.check_registration(state) if not _injected(issue, fed)]
    add("TL901", found, checks.registration_summary(found, state))

    dtype_standin = device.type == "cpu"
    if not dtype_standin:
        result.phase("move", name)
        run("moving %s to %s" % (name, device), model.to, device)
        moved = checks.check_device(state_of(model), device, False)
        summary = "after model.to(%s)" % device
        if moved:
            # Carry on as if the user had moved them, so that TL903/TL904 still run on the device.
            checks.replace_held(model, baseline, checks.mover(device))
            summary += "; what was left behind was moved for the checks that follow"
        add("TL902", moved, summary)

    rebuilt: Set[str] = set()  # what every forward recomputed from registered parameters
    forward_ran = False
    try:
        rebuilt, forward_ran, inputs = run_gradients(cls, request, user_module, result, report, built, device,
                                                     several_classes, seen, again, run, state_of, add)
        if dtype_standin:
            result.phase("move", name)
            run("moving %s with .to(torch.float64)" % name, model.to, torch.float64)
            left = checks.check_device(state_of(model), device, True)
            if left and inputs is not None:
                left = _left_after_forward(model, inputs, left, run, state_of, device, report, state, rebuilt)
            add("TL902", left, "CPU run: model.to(torch.float64) stood in for model.to(device)")
    finally:
        # What forward showed it rebuilds from registered parameters settles TL901 and TL902.
        checks.settle_rebuilt(report, state, rebuilt, forward_ran)


def _left_after_forward(model: nn.Module, inputs: Tuple[Any, Any], left: List[JsonObject], run: Run,
                        state_of: Callable[[nn.Module], probe_checks.State], device: torch.device,
                        report: JsonObject, state: probe_checks.State, rebuilt: Set[str]) -> List[JsonObject]:
    """TL902 after one forward of the moved module on inputs moved likewise: a plain tensor that
    forward itself replaces with the same values on its inputs' dtype and device (a cache such as
    a position table, ``if self.pe.device != x.device: self.pe = self.pe.to(x.device)``) is not
    left behind, and, not trainable, not a registration bug either (TL901 withdraws it). A tensor
    forward updates (a running memory) is state: still reported. ``rebuilt``: settled elsewhere."""
    import torch

    if TYPE_CHECKING:
        checks = probe_checks
    else:
        checks = sys.modules["torchlint_probe_checks"]
    args, kwargs = inputs
    paths = {path for issue in left for path in issue.get("paths") or []} - set(rebuilt)
    before = {held.path: held.tensor for held in state_of(model).held if held.path in paths}
    try:
        with torch.no_grad():
            run("forward", model, *_to_float64(args), **_to_float64(kwargs))
    except UserError:
        return left  # (a forward that fails on the moved inputs shows what was left behind)
    after = {held.path: held.tensor for held in state_of(model).held if held.path in before}
    # Moved, not changed: the same values on the inputs' dtype (a state forward updates is state).
    followed = {path for path, old in before.items() if path in after and after[path] is not old
                and after[path].dtype == torch.float64 and after[path].shape == old.shape
                and torch.equal(old.detach().to(torch.float64), after[path].detach())}
    if not followed:
        return left
    checks.settle_followed(report, state, followed)
    return checks.check_device(state_of(model), device, True)


def _to_float64(value: Any, depth: int = 0) -> Any:
    """Inputs as ``model.to(torch.float64)`` would want them: floating tensors converted."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value
    if depth < 4 and isinstance(value, (list, tuple, dict)):
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        return _rebuilt(value, [(k, _to_float64(v, depth + 1)) for k, v in items])
    return value


def _injected(issue: JsonObject, fed: Optional[Call]) -> bool:
    """Is the issue about a tensor the parent's forward stored on the instance before calling it
    (``self.block.mask = mask``)? The parent's way of passing an input, not the class's state."""
    return fed is not None and bool(issue.get("paths")) and all(path in fed.injected for path in issue["paths"])


def run_gradients(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, result: Result,
                  report: JsonObject, built: Built, device: torch.device, several_classes: bool,
                  seen: Optional[Seen], again: bool, run: Run,
                  state_of: Callable[[nn.Module], probe_checks.State],
                  add: Callable[[str, List[JsonObject], str], None]
                  ) -> Tuple[Set[str], bool, Optional[Tuple[Any, Any]]]:
    """TL903, TL904, TL906 and TL907 with the first inputs that fit; (the paths of the plain tensor
    attributes every forward recomputed from registered parameters, whether forward ran, its inputs)."""
    name = cls.__name__
    model = built.model
    result.phase("inputs", name)
    candidates = input_candidates(model, user_module, request, built, several_classes, run)
    call = seen.calls.get(cls) if again and seen is not None else None
    if call is not None:
        kwargs = call.kwargs or {}
        candidates.insert(0, (call.args, kwargs, "%s (seen when %s.forward called it)" % (
            support.describe(call.args, kwargs), call.caller), False))
    if not candidates:
        if _nothing_to_train(model, report):
            return set(), False, None
        reason = "no example inputs: %s" % HOW_TO_GIVE_INPUTS
        skip_gradients(report, reason, "no example inputs", request.ddp)
    else:
        result.phase("forward", name)
        misfits: List[Tuple[str, str, str]] = []  # (the inputs' shapes, what rejected them, the error)
        fitted = _fit(cls, model, candidates, built, device, seen, run, state_of, report, misfits)
        if fitted:
            gradients, inputs, description, recorded, trusted = min(fitted, key=lambda item: item[0].all_zero())
            if seen is not None:
                seen.pending = recorded
                seen.commit()  # the inputs submodules of the file got from the forward kept
            report["inputs"] = description
            # Still all-zero gradients with guessed inputs: verified again if a class of the file calls it.
            report[WEAK_INPUTS] = bool(gradients.all_zero()) and not trusted
            result.phase("step", name)
            add("TL903", *gradients.tl903())
            # All-zero gradients under the only guess that fit may be the guess's: information. Under
            # two guesses that fit (or inputs meant for it) they are the module's: a warning.
            add("TL904", *gradients.tl904(guessed=not trusted and len(fitted) < 2))
            add("TL906", *gradients.tl906())
            if gradients.failure is not None:
                report["issues"].append(gradients.failure)
                report["status"] = "failed"
            elif gradients.steps:
                result.phase("checkpoint", name)
                check_checkpoint(cls, request, user_module, built, gradients.model, inputs, run, device, state_of,
                                 report, add)
            if request.ddp:
                run_ddp(request, result, report, model, inputs, gradients, run, device, state_of, add)
            return gradients.rebuilt, True, inputs
        if _nothing_to_train(model, report):
            return set(), False, None
        skip_gradients(report, "the guessed inputs did not fit (see why above)",
                       "the guessed inputs did not fit: %s; %s" % (misfit_summary(misfits), HOW_TO_GIVE_INPUTS),
                       request.ddp)
    return set(), False, None


if TYPE_CHECKING:  # (a gradient run that fitted: the run, its inputs, their description, its calls, trusted)
    Fitted = Tuple[probe_checks.GradientRun, Tuple[Any, Any], str, Dict[type, "Call"], bool]


def _fit(cls: Type[nn.Module], model: nn.Module, candidates: List[Tuple[Any, Dict[str, Any], str, bool]],
         built: Built, device: torch.device, seen: Optional[Seen], run: Run,
         state_of: Callable[[nn.Module], probe_checks.State], report: JsonObject,
         misfits: List[Tuple[str, str, str]]) -> List[Fitted]:
    """Gradient runs of the candidates in turn, until one fits (appending to ``misfits`` those that
    do not, and a resized guess after a size mismatch); [(the run, inputs, description, the calls it
    recorded, trusted)]. A failure that is not a misfit of guessed inputs raises."""
    if TYPE_CHECKING:
        checks = probe_checks
    else:
        checks = sys.modules["torchlint_probe_checks"]
    forward = "%s.forward" % cls.__name__
    # Guessed inputs that fit but leave parameters with all-zero gradients (a sequence of one
    # through a softmax) are a weak guess: up to MAX_ZERO_RETRIES more guesses that fit decide,
    # and the one with the fewest such parameters is kept (the first, on a tie).
    fitted: List[Fitted] = []
    for args, kwargs, description, trusted in candidates:
        inputs = (_to_device(args, device), _to_device(kwargs, device))
        gradients = checks.GradientRun(model, state_of, inputs, run, device)
        if seen is not None:
            seen.attempt(gradients.model, built.constructed_with["text"])
        try:
            gradients.go()
        except UserError as failure:
            # A device mismatch is the module's state left behind (TL902 showing itself), whatever the inputs.
            if trusted or failure.stage != forward or failure.always_a_bug or "same device" in failure.error:
                if fitted:
                    break  # a guess that fit already: keep it
                report["inputs"] = description  # what forward failed with
                raise
            # guessed inputs that do not fit
            misfits.append((support.describe(*inputs), _rejected_by(gradients.model, cls, failure), failure.error))
            for repaired in _resized(args, kwargs, failure.error) if len(misfits) <= MAX_RESIZED else []:
                candidates.append((*repaired, "%s (resized: %s)" % (support.describe(*repaired), description),
                                   False))
            continue
        recorded: Dict[type, Call] = {}
        if seen is not None:
            recorded = dict(seen.pending or {})
            seen.end()
        fitted.append((gradients, inputs, description, recorded, trusted))
        if trusted or not gradients.all_zero() or len(fitted) > MAX_ZERO_RETRIES:
            break
    return fitted


MAX_MISFIT_GROUPS = 3
MAX_RESIZED = 3  # guesses resized to the size an elementwise op asked for (after the first misfits only; per misfit: 1 + this)
_SIZE_MISMATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def _resized(args: Tuple[Any, ...], kwargs: Dict[str, Any], error: str
             ) -> List[Tuple[Tuple[Any, ...], Dict[str, Any]]]:
    """The guessed inputs again with each dimension (but the batch's) of the size an elementwise op
    rejected given the size it wanted: ``x + self.offsets`` on (2, 8) indices with 2 fields says
    "The size of tensor a (8) must match the size of tensor b (2)", and (2, 2) fits. All the
    tensors so changed first, then each one alone (a graph's (2, 32) features stay, its adjacency
    becomes (2, 2)). [] without such an error."""

    found: List[Tuple[Tuple[Any, ...], Dict[str, Any]]] = []
    for have, want, only in _resizes(args, kwargs, error):
        one = _resized_inputs(args, kwargs, have, want, only)
        if one is not None and not any(_same_shapes(one, other) for other in found):
            found.append(one)
    return found[:1 + MAX_RESIZED]


_MATRICES_MISMATCH = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _resizes(args: Tuple[Any, ...], kwargs: Dict[str, Any], error: str) -> List[Tuple[int, int, object]]:
    """(a size the inputs have, the size to give it instead, in which input: None for all) for
    what the error says. An elementwise op names both sizes, not which is the input's: each way.
    A linear layer that got ``torch.cat([hidden, action], 1)`` says "(2x832 and 432x300)": the
    concatenation is 400 too wide, so the input whose last size is 432 should be 32 (an actor-
    critic's action beside a hidden layer of 400); each input's last size alone."""
    import torch

    elementwise = _SIZE_MISMATCH.search(error)
    if elementwise is not None:
        a, b = int(elementwise.group(1)), int(elementwise.group(2))
        if a == b or min(a, b) < 1:
            return []
        positions: List[object] = [None] + list(range(len(args))) + list(kwargs)
        return [(have, want, only) for have, want in ((a, b), (b, a)) for only in positions]
    matrices = _MATRICES_MISMATCH.search(error)
    if matrices is None:
        return []
    excess = int(matrices.group(2)) - int(matrices.group(3))
    found: List[Tuple[int, int, object]] = []
    for only, value in list(enumerate(args)) + list(kwargs.items()):
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-1] - excess >= 1 and excess:
            found.append((int(value.shape[-1]), int(value.shape[-1]) - excess, only))
    return found


def _same_shapes(a: Tuple[Tuple[Any, ...], Dict[str, Any]], b: Tuple[Tuple[Any, ...], Dict[str, Any]]) -> bool:
    def shapes(inputs: Tuple[Tuple[Any, ...], Dict[str, Any]]) -> List[Any]:
        return [tuple(getattr(v, "shape", ())) for v in list(inputs[0]) + list(inputs[1].values())]
    return shapes(a) == shapes(b)


def _resized_inputs(args: Tuple[Any, ...], kwargs: Dict[str, Any], have: int, want: int, only: object
                    ) -> Optional[Tuple[Tuple[Any, ...], Dict[str, Any]]]:
    """The inputs with ``have``-sized dimensions made ``want``-sized: in every tensor (``only`` None)
    or in the one at that position or keyword."""
    import torch

    changed = [False]

    def resize(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.dim() < 2:
            return value
        shape = [value.shape[0]] + [want if size == have else size for size in value.shape[1:]]
        if list(value.shape) == shape:
            return value
        changed[0] = True
        torch.manual_seed(0)
        if value.is_floating_point():
            return torch.randn(*shape, dtype=value.dtype)
        if value.dtype == torch.bool:
            return torch.ones(*shape, dtype=torch.bool)
        low, high = (int(value.min()), int(value.max()) + 1) if value.numel() else (0, 1)
        return torch.randint(low, max(high, low + 1), tuple(shape), dtype=value.dtype)

    new_args = tuple(resize(a) if only is None or only == i else a for i, a in enumerate(args))
    new_kwargs = {k: resize(v) if only is None or only == k else v for k, v in kwargs.items()}
    return (new_args, new_kwargs) if changed[0] else None
MAX_ZERO_RETRIES = 2  # more guesses tried when the inputs that fit leave parameters with all-zero gradients
WEAK_INPUTS = "weak_inputs"  # a class report's key (never read by the parent): see run_gradients
MAX_MISFIT_ERROR = 160


def misfit_summary(misfits: List[Tuple[str, str, str]]) -> str:
    """The guessed inputs that forward rejected, once, grouped by what rejected them:
    ``conv (Conv2d) rejected (2, 3, 64, 64) float32 and (2, 3, 224, 224) float32: RuntimeError: ...``."""
    groups: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
    for shapes, where, error in misfits:
        groups.setdefault((where, error.split(":", 1)[0]), []).append((shapes, error))
    parts = []
    for (where, _), tried in list(groups.items())[:MAX_MISFIT_GROUPS]:
        shown = " and ".join(shapes for shapes, _ in tried[:2]) + (
            " and %d more" % (len(tried) - 2) if len(tried) > 2 else "")
        error = tried[0][1]
        error = error if len(error) <= MAX_MISFIT_ERROR else error[:MAX_MISFIT_ERROR] + "..."
        parts.append("%s rejected %s: %s" % (where, shown, error))
    if len(groups) > MAX_MISFIT_GROUPS:
        parts.append("and %d more" % sum(len(t) for t in list(groups.values())[MAX_MISFIT_GROUPS:]))
    return "%d tried; %s" % (len(misfits), "; ".join(parts))


def _rejected_by(model: nn.Module, cls: type, failure: support.UserError) -> str:
    """The innermost submodule of ``model`` whose code raised (``conv (Conv2d)``), else the class's
    own forward, with the line in the user's file when there is one."""
    names = {}
    try:
        names = {id(module): (name, type(module).__name__) for name, module in model.named_modules()}
    except Exception:  # noqa: BLE001
        pass
    found = None
    tb = failure.exception.__traceback__ if failure.exception is not None else None
    count = 0
    while tb is not None and count < 1000:
        count += 1
        frame = tb.tb_frame
        code = frame.f_code
        owner = frame.f_locals.get("self") if code.co_argcount and code.co_varnames[0] == "self" else None
        if owner is not None and id(owner) in names:
            found = names[id(owner)]
        tb = tb.tb_next
    if found is None or not found[0]:
        line = failure.issue.get("line")
        return "%s.forward%s" % (cls.__name__, " (line %s)" % line if line else "")
    return "%s (%s)" % found


def _nothing_to_train(model: nn.Module, report: JsonObject) -> bool:
    """A module with no parameter, no buffer and no tensor attribute (an activation, a reshaping
    block): the checks that need forward have nothing to look at, so they pass without inputs, and
    the class is verified rather than "partly verified" (True: their entries added)."""
    import torch

    try:
        if any(True for _ in model.parameters()) or any(True for _ in model.buffers()) or model.state_dict():
            return False
        if any(isinstance(value, torch.Tensor) for module in model.modules() for value in vars(module).values()):
            return False  # a plain tensor attribute: state a round trip (TL907) or a gradient (TL903) may show
    except Exception:  # noqa: BLE001 - an odd module: the usual way
        return False
    summary = "no parameters, buffers or tensor attributes: nothing to train or save, so no inputs are needed"
    report["checks"] += [check_entry(code, "passed", summary) for code in ("TL903", "TL904", "TL906", "TL907")]
    return True


def run_ddp(request: ProbeRequest, result: Result, report: JsonObject, model: nn.Module,
            inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], gradients: probe_checks.GradientRun, run: Run,
            device: torch.device, state_of: Callable[[nn.Module], probe_checks.State],
            add: Callable[[str, List[JsonObject], str], None]) -> None:
    """--ddp: TL908, two steps of the module as built under DistributedDataParallel (probe_ddp)."""
    if gradients.failure is not None or not gradients.steps:
        why = "training failed" if gradients.failure is not None else "forward's output requires no grad"
        report["checks"].append(check_entry("TL908", "skipped", "%s: no step to take under DDP" % why))
        return
    result.phase("ddp", type(model).__name__)
    if TYPE_CHECKING:
        from . import probe_ddp as ddp
    else:
        ddp = sys.modules.get("torchlint_probe_ddp") or _load_sibling("probe_ddp")
    try:
        found, summary, skipped = ddp.check_ddp(model, inputs, run, device, state_of, request.deadline,
                                                os.path.dirname(request.result_path))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the check could not run here: say so, never a finding
        found, summary, skipped = [], "the check could not run: %s" % support.describe_exception(exc), True
    if skipped:
        report["checks"].append(check_entry("TL908", "skipped", summary))
    else:
        add("TL908", found, summary)


def check_checkpoint(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, built: Built,
                     trained: nn.Module, inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run,
                     device: torch.device, state_of: Callable[[nn.Module], probe_checks.State], report: JsonObject,
                     add: Callable[[str, List[JsonObject], str], None]) -> None:
    """TL907: the trained module's checkpoint loaded into a new instance on the same device, and,
    when the run is on another device than the CPU, read back on the CPU into a third one."""
    if TYPE_CHECKING:
        checks = probe_checks
    else:
        checks = sys.modules["torchlint_probe_checks"]
    import torch

    found, summary, skipped = checks.check_round_trip(
        trained, _built_again(cls, request, user_module, built.synthesized), inputs, run, device, state_of)
    if skipped:
        report["checks"].append(check_entry("TL907", "skipped", summary))
        return
    cpu = torch.device("cpu")
    if device.type != cpu.type and not found:  # (state the checkpoint lost differs on any device)
        across, said, _ = checks.check_across_devices(
            trained, _built_again(cls, request, user_module, built.synthesized), inputs,
            (_to_device(inputs[0], cpu), _to_device(inputs[1], cpu)), run, device, cpu, state_of)
        found, summary = found + across, "%s; %s" % (summary, said)
    add("TL907", found, summary)


def _built_again(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType,
                 synthesized: Optional[Dict[str, Any]] = None) -> Optional[nn.Module]:
    """A second instance for the checkpoint round trip, built the same way under another seed
    (None when it cannot be: a constructor that worked once may not twice)."""
    if TYPE_CHECKING:
        checks = probe_checks
    else:
        checks = sys.modules["torchlint_probe_checks"]
    try:
        built = construct(cls, request, user_module, checks.ROUND_TRIP_SEED, synthesized)
    except UserError:
        return None
    return built.model if isinstance(built, Built) else None


# -- the whole run --------------------------------------------------------------------------------

def pick_device(torch: ModuleType, requested: str) -> Tuple[Device, Optional[str], str]:
    """(torch.device, name, note) or raises RuntimeError with a message for the user."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        return pick_cuda(torch, requested)
    if requested == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise RuntimeError("--device mps was asked for, but torch.backends.mps.is_available() is False "
                               "here (torch %s)" % torch.__version__)
        return torch.device("mps"), "Apple MPS", ""
    return (torch.device("cpu"), None,
            "CPU run: TL902 moves the module with .to(torch.float64) as the observable stand-in for .to(device)")


def pick_cuda(torch: ModuleType, requested: str) -> Tuple[Device, Optional[str], str]:
    if not torch.cuda.is_available():
        raise RuntimeError("--device %s was asked for, but torch.cuda.is_available() is False here (torch %s%s)" % (
            requested, torch.__version__, ", built without CUDA" if torch.version.cuda is None else ""))
    device = torch.device(requested)
    index = device.index if device.index is not None else torch.cuda.current_device()
    device = torch.device("cuda", index)
    return device, torch.cuda.get_device_name(index), ""


def end_with_parent(every: float = 0.5) -> None:
    """The probe's owner (the CLI, the language server) ends it when the run is over; an owner
    killed first (SIGKILL, a crash) cannot, and the user's code would run on with nobody to read
    its result (a hung forward: for ever). So the probe ends as soon as it has another parent."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)
    threading.Thread(target=watch, name="torchlint-probe-owner", daemon=True).start()


def main(request_path: str) -> Result:
    end_with_parent()
    with open(request_path, encoding="utf-8") as handle:
        request = protocol.ProbeRequest.from_json(handle.read())
    result = Result(request.result_path)
    result.save()
    _dump_stacks(request)

    result.phase("torch")
    try:
        import torch
    except ImportError as err:
        result.fail("no_torch", "torch cannot be imported by %s (%s)" % (sys.executable, err))
        return result
    result.data.torch_version = torch.__version__
    try:
        device, device_name, note = pick_device(torch, request.device)
    except RuntimeError as err:
        result.fail("no_cuda", str(err))
        return result
    if device.type == "cpu":
        bound = support.bound_memory(request.memory_share)
        if bound is not None:
            note = "%s; allocations bounded to %.1f GiB (%g of this machine's memory)" % (
                note, bound / 2 ** 30, request.memory_share)
    result.data.device, result.data.device_name, result.data.device_note = str(device), device_name, note
    _load_sibling("probe_checks")
    _load_sibling("probe_inputs")

    path = request.path
    result.phase("import")
    what = request.import_target.module if request.import_target is not None else os.path.basename(path)
    try:
        user_module, how = run_user("importing %s" % what, None, path, load_user_module, request)
    except UserError as failure:
        result.data.file_issues.append(failure.issue)
        return result
    result.data.imported_as = how

    class_name = request.class_name
    classes = _classes_to_verify(user_module, torch, request, result)
    if classes is None:
        return result
    baseline = set(vars(torch.nn.Module()))
    seen = Seen(torch, classes)
    with seen:  # (the runs below may record calls in turn)
        reports = [verify_one(cls, request, user_module, result, baseline, device, len(classes) > 1, seen)
                   for cls in classes]
        if class_name and reports[0]["status"] in (PARTLY, "skipped"):
            others = [other for other in module_classes(user_module, torch) if other is not classes[0]]
            feed([classes[0]], others[::-1], request, user_module, device, seen)  # (the top model is often last)
        _verify_again(classes, reports, request, user_module, result, baseline, device, seen)
    return result


def _dump_stacks(request: ProbeRequest) -> None:
    """Where the probe is, written to the request's stack_path when it crashes or hangs."""
    stack_file = open(request.stack_path, "w")  # (faulthandler keeps it, and so keeps it open)
    faulthandler.enable(file=stack_file, all_threads=True)  # os.abort, segfaults: where it was
    # A hang: the parent sends SIGUSR1 just before the kill, and faulthandler writes where it
    # is stuck. Where there are no such signals (Windows), a timer does it shortly before the deadline.
    if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    else:
        remaining = request.deadline - time.time()
        margin = min(1.0, max(0.25, 0.1 * remaining))
        if remaining > margin:
            faulthandler.dump_traceback_later(remaining - margin, file=stack_file)


def _classes_to_verify(user_module: ModuleType, torch: ModuleType, request: ProbeRequest,
                       result: Result) -> Optional[List[type]]:
    """The class the request names, else the file's Module classes; None when there is none to
    verify (the result says why)."""
    path = request.path
    class_name = request.class_name
    if class_name:
        cls = vars(user_module).get(class_name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
            what = "no class %s" % class_name if cls is None else "%s is not an nn.Module subclass" % class_name
            names = [c.__name__ for c in module_classes(user_module, torch)]
            hint = ": its nn.Module classes are %s" % ", ".join(names) if names else ""
            result.fail("no_class", "%s in %s%s" % (what, os.path.basename(path), hint))
            return None
        return [cls]
    classes = module_classes(user_module, torch)
    if not classes:
        defined = [value.__name__ for value in list(vars(user_module).values())
                   if inspect.isclass(value) and getattr(value, "__module__", None) == user_module.__name__]
        result.fail("no_module_class", (
            "%s defines no nn.Module subclass%s, so there is nothing to verify: give the file that defines "
            "your model, or name an imported one with FILE::Class" % (
                os.path.basename(path), " (its classes: %s)" % ", ".join(defined) if defined else "")))
        return None
    return classes


def _verify_again(classes: List[type], reports: List[JsonObject], request: ProbeRequest, user_module: ModuleType,
                  result: Result, baseline: Set[str], device: torch.device, seen: Seen) -> None:
    """After each class's own verification (``reports``, in the order of ``classes``), the
    classes it left partly verified or skipped, with what the others gave them."""
    # A class whose gradient checks found no inputs, but that another class of the file called
    # while it was verified (a rotary table inside an attention layer): again, with those inputs.
    # A class that could not be built, or whose own instance those inputs do not fit (U-Net's
    # Down blocks): on the instance the parent built and the inputs its forward gave it. Each
    # such run may record the calls of the classes it holds in turn: until nothing new comes.
    tried: Set[type] = set()
    made_up: Set[type] = set()
    fed_across = fed_other_ways = False
    while True:
        for index, cls in enumerate(classes):  # copies nobody needs: their memory back
            if cls in seen.calls and (cls in tried or reports[index]["status"] not in (PARTLY, "skipped")):
                seen.calls[cls].instance = None
        waiting = [(index, cls) for index, cls in enumerate(classes) if cls not in tried and cls in seen.calls
                   and (reports[index]["status"] in (PARTLY, "skipped") or reports[index].get(WEAK_INPUTS))]
        if not waiting and not fed_other_ways:
            # A parent of this file built in the other ways its code shows (each factory).
            fed_other_ways = True
            unfed = [cls for index, cls in enumerate(classes) if cls not in seen.calls
                     and reports[index]["status"] in (PARTLY, "skipped")]
            used = {cls: str((reports[index].get("constructed_with") or {}).get("text") or "")
                    for index, cls in enumerate(classes) if reports[index]["status"] != "skipped"}
            if unfed and used:
                feed(unfed, [cls for cls in classes[::-1] if cls in used], request, user_module, device, seen,
                     other_ways=used)
                continue
        if not waiting and not fed_across:
            # A parent in another file of the project (file A builds this file's class): its
            # classes are built and run as feed does, recording what they call here.
            fed_across = True
            unfed = [cls for index, cls in enumerate(classes) if cls not in seen.calls
                     and reports[index]["status"] in (PARTLY, "skipped")]
            if unfed and request.feeders and request.import_target is not None:
                feed_from_other_files(unfed, request, device, seen)
                continue
        if not waiting:
            # What nothing builds nor feeds: arguments made up from its signature. What these
            # instances call may feed more classes in turn.
            unbuilt = [(index, cls) for index, cls in enumerate(classes) if cls not in made_up
                       and reports[index]["status"] == "skipped" and _needs_arguments(reports[index])]
            if not unbuilt:
                break
            for index, cls in unbuilt:
                made_up.add(cls)
                reports[index] = made_up_arguments(cls, request, user_module, result, baseline, device,
                                                   len(classes) > 1, seen, reports[index])
            continue
        for index, cls in waiting:
            tried.add(cls)
            reports[index] = _verify_on_its_call(cls, reports[index], request, user_module, result, baseline,
                                                 device, len(classes) > 1, seen)


def _verify_on_its_call(cls: Type[nn.Module], report: JsonObject, request: ProbeRequest, user_module: ModuleType,
                        result: Result, baseline: Set[str], device: torch.device, several_classes: bool,
                        seen: Seen) -> JsonObject:
    """A class another class of the file called: again with the inputs of that call, when its own
    run found none that fit; then on the caller's instance and inputs, when it is still partly
    verified or skipped. The report kept (the new one only when it says more)."""
    call = seen.calls[cls]
    if report["status"] == PARTLY or report.get(WEAK_INPUTS):
        again = verify_one(cls, request, user_module, result, baseline, device, several_classes, seen,
                           replace=report)
        if (again["status"] != PARTLY or again["issues"]) and not (
                report.get(WEAK_INPUTS) and (again["status"] == PARTLY or again.get(WEAK_INPUTS))):
            report = again
        else:
            result.data.classes[result.data.classes.index(again)] = report
    if report["status"] in (PARTLY, "skipped") and call.instance is not None and call.kwargs is not None:
        fed = verify_one(cls, request, user_module, result, baseline, device, several_classes, seen,
                         replace=report, fed=call)
        if report["status"] == "skipped" or fed["status"] != PARTLY or fed["issues"]:
            return fed
        result.data.classes[result.data.classes.index(fed)] = report
    return report


PARTLY = "partly verified"
MAX_FEEDING_INPUTS = 4  # the inputs tried per class that may feed the one asked for


def _table_entry(cls: type) -> Optional[str]:
    """What to paste into pyproject.toml for a class that needs arguments (probe_arguments.table_entry)."""
    import torch

    if TYPE_CHECKING:
        from . import probe_arguments as arguments
    else:
        arguments = _arguments_module()
    try:
        return arguments.table_entry(cls, lambda value: issubclass(value, torch.nn.Module))
    except Exception:  # noqa: BLE001 - an unreadable signature: the reason alone
        return None


def _arguments_module() -> ModuleType:
    """probe_arguments, loaded by path on first use (as the other siblings are)."""
    return sys.modules.get("torchlint_probe_arguments") or _load_sibling("probe_arguments")


def _needs_arguments(report: JsonObject) -> bool:
    return str(report.get("skip_reason") or "").startswith("needs arguments")


def made_up_arguments(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, result: Result,
                      baseline: Set[str], device: torch.device, several_classes: bool, seen: Seen,
                      skipped: JsonObject) -> JsonObject:
    """A class that needs arguments nothing gives: verified with arguments made up from its
    signature (probe_arguments), the first candidate that builds and whose forward some inputs
    fit winning. A made-up construction that fails, or a run that fails, says nothing about the
    class (the arguments were a guess): the class stays skipped, its reason saying what was tried."""
    import torch

    if TYPE_CHECKING:
        from . import probe_arguments as arguments
    else:
        arguments = _arguments_module()

    def build(config: type, kwargs: Dict[str, Any]) -> Any:
        return config(**kwargs)

    def is_module(value: type) -> bool:
        return issubclass(value, torch.nn.Module)

    try:
        made: List[Dict[str, Any]] = arguments.synthesize(cls, build, is_module)
    except BaseException:  # noqa: B902 - a config object's constructor may raise anything: no candidate
        made = []
    # Each attempt: made-up arguments of the class, or a factory's call with its own made up.
    attempts: List[Union[Dict[str, Any], Constructor]] = [*made, *factories_made_up(cls, request, user_module)]
    best: Optional[JsonObject] = None
    current = skipped
    failures: List[str] = []
    retries = 0
    for attempt in attempts:  # grows while it is walked: constructions retried with nested lists
        if time.time() > request.deadline:
            break
        if isinstance(attempt, protocol.Constructor):
            report, what = _verify_built_by(attempt, cls, request, user_module, result, baseline, device,
                                            several_classes, seen, current), attempt.expression
        else:
            report = verify_one(cls, request, user_module, result, baseline, device, several_classes, seen,
                                replace=current, synthesized=attempt)
            what = "%s(%s)" % (cls.__name__, _kwargs_text(attempt))
        current = report
        if report["status"] == "skipped":
            failures.append(str(report["skip_reason"]).split(TRIED_WHAT_THE_CODE_SUGGESTS, 1)[-1])
            if not isinstance(attempt, protocol.Constructor):
                again = arguments.nested_candidates(attempt, failures[-1])[:arguments.MAX_NESTED_TRIES - retries]
                retries += len(again)
                attempts.extend(again)
        elif report["status"] == "failed":
            failures.append("%s built, then %s" % (what, "; ".join(
                str(issue.get("message", ""))[:200] for issue in report["issues"] if issue.get("code") == "TL905")))
        elif best is None or _rank(report) > _rank(best):
            best = report
        if best is not None and _rank(best) == 2:
            break
    chosen = best
    if chosen is None:
        chosen = skipped
        if failures:
            skipped["skip_reason"] = "%s; %s tried: %s" % (skipped["skip_reason"], SYNTHESIZED, "; ".join(failures))
        else:
            missing = arguments.unfillable(cls, is_module)
            if missing:
                skipped["skip_reason"] = "%s; nothing says what to give %s" % (
                    skipped["skip_reason"], ", ".join(missing))
    if current is not chosen:
        classes = result.data.classes
        classes[classes.index(current)] = chosen
    return chosen


MAX_FACTORY_SIZES = 2  # the made-up sizes a factory is called with (its count parameters: often one value)


def factories_made_up(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType) -> List[Constructor]:
    """The file's factories of the class that need arguments (``def resnet18(num_classes,
    pretrained=False)``, found by verify.targets), each called with those arguments made up from
    its own signature as a class's are: ``resnet18(num_classes=10, pretrained=False)``. Only
    arguments Python can write back as text (numbers, lists, flags), so that the call is shown
    and built again like any other of the project's."""
    import torch

    if TYPE_CHECKING:
        from . import probe_arguments as arguments
    else:
        arguments = _arguments_module()
    found: List[Constructor] = []
    for constructor in request.constructors.get(cls.__name__) or []:
        try:
            call = ast.parse(constructor.expression or "", mode="eval").body
            if not (constructor.made_up and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            given = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
            function = vars(user_module).get(call.func.id)
            if not inspect.isfunction(function):
                continue
            sizes = arguments.synthesize(function, lambda config, kwargs: config(**kwargs),
                                         lambda value: issubclass(value, torch.nn.Module))
        except Exception:  # noqa: BLE001 - not such a call, or a config object that would not build
            continue
        for kwargs in sizes[:MAX_FACTORY_SIZES]:
            kwargs = {**kwargs, **given}
            if not all(_written_back(value) for value in kwargs.values()):
                continue  # (a made-up config object)
            text = "%s(%s)" % (call.func.id, ", ".join("%s=%r" % item for item in kwargs.items()))
            if all(c.expression != text for c in found):
                found.append(protocol.Constructor("%s, its arguments made up" % constructor.origin, expression=text))
    return found


def _written_back(value: object) -> bool:
    """Whether repr(value) reads back as the same value (a number, a list of them, a flag)."""
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _verify_built_by(constructor: Constructor, cls: Type[nn.Module], request: ProbeRequest,
                     user_module: ModuleType, result: Result, baseline: Set[str], device: torch.device,
                     several_classes: bool, seen: Seen, current: JsonObject) -> JsonObject:
    """verify_one with ``constructor`` the only way to build the class, as though the project had it."""
    name = cls.__name__
    saved = request.constructors.get(name)
    request.constructors[name] = [constructor]
    try:
        return verify_one(cls, request, user_module, result, baseline, device, several_classes, seen, replace=current)
    finally:
        if saved is None:
            del request.constructors[name]
        else:
            request.constructors[name] = saved


def _rank(report: JsonObject) -> int:
    """How well a made-up construction was verified: 2 fully, 1 with parameters left at all-zero
    gradients by the guessed inputs (the next made-up sizes may do better: a dead ReLU of width 2),
    0 partly."""
    return 0 if report["status"] == PARTLY else 1 if report.get(WEAK_INPUTS) else 2


FEEDING_ACROSS_SHARE = 0.3  # of the time left: what building the parents of other files may take


def feed_from_other_files(wanted: List[type], request: ProbeRequest, device: torch.device, seen: Seen) -> None:
    """Classes of this file that nothing here built or fed: the project's other files that build
    them (request.feeders, found by the runner: file A's parent holding file B's class) are
    imported, and their classes built and run as ``feed`` does, until every one of ``wanted`` is
    called. Nothing is reported about those files; what fails there only feeds nothing."""
    import torch

    deadline = time.time() + FEEDING_ACROSS_SHARE * max(request.deadline - time.time(), 0.0)
    for entry in request.feeders:
        if all(cls in seen.calls for cls in wanted) or time.time() > deadline:
            return
        module_name, path = entry.get("module"), entry.get("path")
        if not isinstance(module_name, str) or not isinstance(path, str):
            continue
        constructors: Dict[str, Any] = entry.get("constructors") or {}
        calls: Dict[str, Any] = entry.get("input_calls") or {}
        if not isinstance(constructors, dict) or not isinstance(calls, dict):
            continue
        their = copy.copy(request)
        their.path, their.deadline = path, deadline
        their.init_kwargs, their.input_shapes, their.input_exprs = None, None, None
        their.constructors = {name: [protocol.Constructor.from_dict(c) for c in found if isinstance(c, dict)]
                              for name, found in constructors.items() if isinstance(found, list)}
        their.input_calls = {name: [c for c in found if isinstance(c, dict)]
                             for name, found in calls.items() if isinstance(found, list)}
        try:
            module = run_user("importing %s" % module_name, None, path, importlib.import_module, module_name)
        except UserError:
            continue
        feed(wanted, module_classes(module, torch)[::-1], their, module, device, seen)


MAX_OTHER_WAYS = 4  # other constructions of a class tried to feed the classes nothing fed


def feed(wanted: List[type], feeders: List[Type[nn.Module]], request: ProbeRequest, user_module: ModuleType,
         device: torch.device, seen: Seen, other_ways: Optional[Dict[type, str]] = None) -> None:
    """FILE::Class, for a class that could not be built or fed on its own: build the file's other
    classes as their own verification would and run their forward, until one calls each of
    ``wanted`` (Seen records the call). Nothing is reported about them: what fails only feeds nothing.
    ``other_ways``: {feeder: the construction its own verification used}: each feeder is built
    instead in the other ways the code shows (``resnet50()`` holds the Bottleneck that
    ``resnet18()`` does not)."""
    for feeder in feeders:
        if all(cls in seen.calls for cls in wanted) or time.time() > request.deadline:
            return
        if other_ways is None:
            _feed_once(feeder, functools.partial(construct, feeder, request, user_module), request, user_module,
                       device, seen)
            continue
        used = other_ways.get(feeder)
        ways = [c for c in request.constructors.get(feeder.__name__) or []
                if not c.before_defaults and not c.made_up and (c.expression or c.factory) != used][:MAX_OTHER_WAYS]
        for way in ways:
            if all(cls in seen.calls for cls in wanted) or time.time() > request.deadline:
                return
            _feed_once(feeder, functools.partial(_first, build_candidate, way, feeder, user_module, request.path),
                       request, user_module, device, seen)


def _first(function: Callable[..., Tuple[Union[Built, str], str]], *args: Any) -> Union[Built, str]:
    return function(*args)[0]


def _feed_once(feeder: Type[nn.Module], make: Callable[[], Union[Built, str]], request: ProbeRequest,
               user_module: ModuleType, device: torch.device, seen: Seen) -> None:
    """Build ``feeder`` with ``make`` and run its forward with the first inputs that fit, recording calls."""
    import torch

    name = feeder.__name__

    def run(doing: str, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return run_user(doing, name, request.path, function, *args, **kwargs)

    if True:  # (the body feed had)
        seen.current = feeder
        try:
            with support.Assignments(torch.nn.Module):
                built = make()
            if not isinstance(built, Built):
                return
            model = built.model
            if device.type != "cpu":
                run("moving %s to %s" % (name, device), model.to, device)
            for args, kwargs, _, _ in input_candidates(model, user_module, request, built, True, run)[
                    :MAX_FEEDING_INPUTS]:
                seen.attempt(model, built.constructed_with["text"])
                try:
                    with torch.enable_grad():
                        run("%s.forward" % name, model, *_to_device(args, device), **_to_device(kwargs, device))
                except UserError:
                    continue
                seen.commit()
                break
        except Exception:  # noqa: BLE001 - UserError included: a class that cannot feed, nothing to say
            return
        finally:
            seen.current = None
            seen.end()


class Call:
    """How the forward of a class being verified called an instance of another class of the
    file: that instance (a copy made as the call began; None when it could not be copied), the
    arguments it was given (copies; ``kwargs`` None when this torch cannot show them), the
    calling class, the instance's path in it and the calling module's construction."""

    def __init__(self, instance: Optional[nn.Module], args: Tuple[Any, ...], caller: str, path: Optional[str],
                 caller_built: str) -> None:
        self.instance = instance
        self.args = args
        self.kwargs: Optional[Dict[str, Any]] = None
        self.caller = caller
        self.path = path
        self.caller_built = caller_built
        # Paths (from the instance) of the tensor attributes the caller's forward stored on it, or
        # on its submodules, before the call: they were not there when the caller's run began.
        self.injected: Set[str] = set()

    def built_as(self) -> str:
        """``UNet(n_channels=3).down1``: the instance, as the user's code reaches it."""
        if self.path:
            return "%s.%s" % (self.caller_built or self.caller, self.path)
        return "an instance %s.forward called (held outside its registered submodules)" % self.caller

    def where(self) -> str:
        return "%s.forward, its call of %s" % (self.caller, self.path or "an unregistered instance")


class Seen:
    """The first call of each class of the file while another class of the file was verified
    (global forward hooks, removed at the end): the instance the project's own model built and
    the inputs it gave it, to verify a class that cannot be built, or fed, on its own."""

    MAX_NUMEL = 1 << 22  # elements of one input tensor copied
    MAX_COPIED = 1 << 25  # elements of the parameters and buffers of the instances copied, all together

    def __init__(self, torch: ModuleType, classes: List[type]) -> None:
        self.torch = torch
        self.classes = set(classes)
        self.calls: Dict[type, Call] = {}  # the first per class, from a forward that ran
        self.current: Optional[type] = None
        self.pending: Optional[Dict[type, Call]] = None  # None: not in a forward attempt
        self.open: Dict[int, Tuple[type, Call]] = {}  # id(module) -> its call begun, its forward not yet returned
        self.names: Dict[int, str] = {}  # id(submodule) -> its path in the module being run
        self.attributes: Dict[int, Set[str]] = {}  # id(submodule) -> its tensor attributes as the run began
        self.caller_built = ""
        self.copied = 0
        self._hooks: List[RemovableHandle] = []
        # (Copies made inside the gradient run's torch function mode must not count as reads by forward.)
        self._quiet: Callable[[], Any] = getattr(torch._C, "DisableTorchFunction", None) or _no_context

    def __enter__(self) -> Seen:
        hooks = self.torch.nn.modules.module
        try:
            self._hooks.append(hooks.register_module_forward_pre_hook(self._begin))
        except Exception:  # noqa: BLE001 - an old torch: no calls recorded
            return self
        try:
            self._hooks.append(hooks.register_module_forward_hook(self._end, with_kwargs=True))
        except TypeError:  # a torch before 2.0: what was passed by keyword is unknown
            self._hooks.append(hooks.register_module_forward_hook(
                lambda module, args, output: self._end(module, args, None, output)))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        return False

    def attempt(self, model: nn.Module, built: str) -> None:
        """A forward of ``model`` (built as ``built`` says) with new inputs begins: what it
        records counts only if it runs (commit)."""
        self.pending, self.open = {}, {}
        self.names = {id(module): name for name, module in model.named_modules() if name}
        self.attributes = {id(module): {name for name, value in vars(module).items()
                                        if isinstance(value, self.torch.Tensor)} for module in model.modules()}
        self.caller_built = built
        self.copied = sum(self._numel(call.instance) for call in self.calls.values())

    def commit(self) -> None:
        for cls, call in (self.pending or {}).items():
            self.calls.setdefault(cls, call)
        self.end()

    def end(self) -> None:
        """No forward attempt is under way: nothing is recorded (a construction, a move)."""
        self.pending, self.open, self.names, self.attributes = None, {}, {}, {}

    def _begin(self, module: nn.Module, args: Tuple[Any, ...]) -> None:
        try:
            self._note_begin(module, args)
        except Exception:  # noqa: BLE001 - an odd module or input: not recorded, and the forward goes on
            self.open.pop(id(module), None)
        return None

    def _end(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]], output: object) -> None:
        try:
            self._note_end(module, kwargs)
        except Exception:  # noqa: BLE001
            pass
        return None

    def _note_begin(self, module: nn.Module, args: Tuple[Any, ...]) -> None:
        cls = type(module)
        pending = self.pending
        if pending is None or cls not in self.classes or cls in self.calls or cls in pending \
                or self.current is None or cls is self.current or id(module) in self.open \
                or any(begun is cls for begun, _ in self.open.values()):
            return None
        injected = {(prefix + "." if prefix else "") + name: value for prefix, sub in module.named_modules()
                    if id(sub) in self.attributes for name, value in vars(sub).items()
                    if isinstance(value, self.torch.Tensor) and name not in self.attributes[id(sub)]}
        with self._quiet():
            copied = self._copy_value(args)
            if copied is _TOO_BIG:
                return None
            instance = self._copy_module(module, {id(value) for value in injected.values()})
        call = Call(instance, tuple(copied), self.current.__name__, self.names.get(id(module)), self.caller_built)
        call.injected = set(injected)
        self.open[id(module)] = (cls, call)
        return None

    def _note_end(self, module: nn.Module, kwargs: Optional[Dict[str, Any]]) -> None:
        begun = self.open.pop(id(module), None)
        if begun is None or self.pending is None:
            return None
        cls, call = begun
        if kwargs is not None:
            with self._quiet():
                copied = self._copy_value(kwargs)
            if copied is _TOO_BIG:
                return None
            call.kwargs = dict(copied)
        self.pending[cls] = call
        return None

    def _copy_value(self, value: Any, depth: int = 0) -> Any:  # (any nesting of inputs)
        """Tensors copied (detached, requires_grad kept), in tuples, lists and dicts; other
        values as they are; _TOO_BIG for a tensor over MAX_NUMEL."""
        torch = self.torch
        if isinstance(value, torch.Tensor):
            if value.numel() > self.MAX_NUMEL:
                return _TOO_BIG
            with torch.no_grad():
                copied = value.detach().clone()
            return copied.requires_grad_() if value.requires_grad and copied.is_floating_point() else copied
        if depth < 4 and isinstance(value, (list, tuple, dict)):
            # (an OrderedDict of features, a namedtuple: copied too, else their tensors stay in the
            # parent's graph, which the parent's backward frees)
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            copies = [(key, self._copy_value(item, depth + 1)) for key, item in items]
            if any(item is _TOO_BIG for _, item in copies):
                return _TOO_BIG
            return _rebuilt(value, copies)
        return value

    def _numel(self, module: Optional[nn.Module]) -> int:
        if module is None:
            return 0
        return sum(t.numel() for t in module.parameters()) + sum(t.numel() for t in module.buffers())

    def _copy_module(self, module: nn.Module, injected: Set[int]) -> Optional[nn.Module]:
        """A deep copy as the call begins (the parent's run goes on to train and move its own);
        None when it is too big or cannot be copied. ``injected``: ids of tensors the caller's
        forward stored on it, copied detached (their graph is the caller's, freed by its backward)."""
        torch = self.torch
        try:
            size = self._numel(module)
            if self.copied + size > self.MAX_COPIED:
                return None
            # Non-leaf tensor attributes (what weight_norm computes) cannot be deep-copied: the copy
            # shares them, as GradientRun's copy does; its forward recomputes them.
            memo: Dict[int, Any] = {id(value): value.detach() if id(value) in injected else value
                                    for sub in module.modules() for value in vars(sub).values()
                                    if isinstance(value, torch.Tensor) and not value.is_leaf}
            with torch.no_grad():
                instance = copy.deepcopy(module, memo)
        except BaseException:  # noqa: B902 - user objects may refuse to be copied (or raise anything): not fed
            return None
        self.copied += size
        return instance if isinstance(instance, torch.nn.Module) else None


_TOO_BIG = object()


def _rebuilt(value: Any, copies: List[Tuple[Any, Any]]) -> Any:
    """A container of the same kind as ``value`` holding ``copies`` ((key, item) pairs); a plain
    dict / list / tuple when its own type cannot be built that way."""
    kind = type(value)
    try:
        if isinstance(value, dict):
            made = kind()
            made.update(copies)
            return made
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return kind(*(item for _, item in copies))
        return kind(item for _, item in copies)
    except Exception:  # noqa: BLE001 - a container type of the user's with another constructor
        if isinstance(value, dict):
            return dict(copies)
        return tuple(item for _, item in copies) if isinstance(value, tuple) else [item for _, item in copies]


class _no_context:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def verify_one(cls: Type[nn.Module], request: ProbeRequest, user_module: ModuleType, result: Result,
               baseline: Set[str], device: torch.device, several_classes: bool, seen: Seen,
               replace: Optional[JsonObject] = None, fed: Optional[Call] = None,
               synthesized: Optional[Dict[str, Any]] = None) -> JsonObject:
    """Verify one class into a new report (in place of ``replace`` in the result, if given);
    ``fed``: on the instance and inputs a parent's call recorded (Seen); ``synthesized``: built
    with these made-up constructor arguments."""
    path = request.path
    sys.setrecursionlimit(max(sys.getrecursionlimit(), _RECURSION_LIMIT))  # user code may have lowered it
    report: JsonObject = {"name": cls.__name__, "status": "verified", "skip_reason": None, "partial_reason": None,
              "inputs": None, "constructed_with": None, "built_by": None, "checks": [], "issues": [],
              "table_entry": None}
    classes = result.data.classes
    if replace is not None:
        classes[classes.index(replace)] = report
    else:
        classes.append(report)
    seen.current = cls
    try:
        verify_class(cls, request, user_module, result, report, baseline, device, several_classes,
                     seen, replace is not None and fed is None and synthesized is None, fed, synthesized)
    except UserError as failure:
        report["status"] = "failed"
        report["issues"].append(failure.issue)
    except BaseException as exc:  # noqa: B902 - a torchlint bug, or torch refusing something: say so, go on
        report["status"] = "failed"
        report["issues"].append(failure_issue(exc, "verifying %s" % cls.__name__, cls.__name__, path))
    finally:
        seen.current = None
        seen.end()
    for issue in report["issues"]:
        if issue.get("code") == "TL905" and not issue.get("line"):
            issue["line"] = support.class_line(cls, path)  # no frame in the file: the class it concerns
    report["checks"].sort(key=lambda check: check["code"])
    return report


def run_probe(request_path: str) -> None:
    result = main(request_path)
    result.data.finished = True
    result.data.phase = "done"
    result.data.current_class = None
    result.save()


if __name__ == "__main__":
    # Run by path, Python put this folder first on sys.path: it must not shadow the user's
    # own modules (a `report.py` or `runner.py` next to their model).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    status = 0
    try:
        run_probe(sys.argv[1])
    except BaseException:  # noqa: B902 - a torchlint bug: the parent reports the stderr tail
        try:
            traceback.print_exc()
        except BaseException:  # noqa: B902
            pass
        status = 70
    finally:
        # Skip interpreter shutdown: the user's non-daemon threads and atexit hooks
        # must not keep the process alive or change the outcome.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: B902 - user code may have replaced or closed them
            pass
        _exit(status)
