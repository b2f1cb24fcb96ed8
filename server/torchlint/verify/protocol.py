"""What ``torchlint verify`` sends its probe (:class:`ProbeRequest`) and what comes back
(:class:`ProbeResult`), and their JSON: written and read here only.

Both ends use this module: runner.py imports it as part of the package; probe.py, run by path
with the workspace's interpreter (where torchlint may not be installed), loads it by path. So it
uses the standard library only and never imports torch. The request is a file the runner
writes; the result is a file the probe rewrites after every phase, so that when the user's code
ends the process or hangs, the runner still knows how far verification got. The result is never
trusted (user code runs in the process that writes it): :meth:`ProbeResult.from_dict` keeps what
has the expected type and leaves the defaults for the rest. The issue and class-report entries
of the result are the dicts ``probe_support.new_issue`` and ``probe.verify_one`` build; the
runner reads them with ``report.Issue.from_dict`` / ``report.ClassReport.from_dict``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional

# A JSON object as json.loads gives it (the values are whatever the other end wrote).
JsonObject = Dict[str, Any]

# Bound when the module loads, before any user code runs in the probe: user code may monkeypatch json.
_dumps, _loads = json.dumps, json.loads


def _to_plain(value: object) -> Any:
    """Dataclasses, lists and dicts as JSON values (no copy of anything else: a user's object
    in an issue is written by the caller's ``default``, never deep-copied)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_to_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _to_plain(item) for key, item in value.items()}
    return value


def _text(value: object) -> Optional[str]:
    """A string from JSON, whatever the value was (None stays None)."""
    return None if value is None else value if isinstance(value, str) else str(value)


def _dicts(value: object) -> List[JsonObject]:
    """The dict entries of a JSON list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _share(value: object) -> float:
    """A share from JSON: a number above 0 and at most 1, else 1 (the whole)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return 1.0
    return float(value)


# -- the request ------------------------------------------------------------------------------------

@dataclass
class InputShape:
    """One --input-shape: a random tensor of ``shape`` (integers in [0, 2) when ``dtype`` is int64)."""

    shape: List[int]
    dtype: str = "float32"  # a torch dtype's name

    def to_dict(self) -> JsonObject:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, data: JsonObject) -> "InputShape":
        return cls([int(size) for size in data.get("shape") or []], _text(data.get("dtype")) or "float32")


@dataclass
class Constructor:
    """One way to build a class that needs arguments: a Python expression evaluated in its
    module's namespace, or a factory ``"pkg.mod:function"`` (see verify.targets)."""

    origin: str  # "models/resnet.py:88, a call site"
    expression: Optional[str] = None
    factory: Optional[str] = None
    before_defaults: bool = False  # the user's configuration: tried before the class's defaults
    # A factory of the file that needs arguments (``expression``: its call with what is fixed,
    # ``resnet18(pretrained=False)``): called with the others made up from its signature, only
    # when nothing else builds the class (probe.made_up_arguments).
    made_up: bool = False

    def to_dict(self) -> JsonObject:
        data: JsonObject = {"origin": self.origin}
        if self.expression is not None:
            data["expression"] = self.expression
        if self.factory is not None:
            data["factory"] = self.factory
        if self.before_defaults:
            data["before_defaults"] = True
        if self.made_up:
            data["made_up"] = True
        return data

    @classmethod
    def from_dict(cls, data: JsonObject) -> "Constructor":
        return cls(_text(data.get("origin")) or "the request", _text(data.get("expression")),
                   _text(data.get("factory")), data.get("before_defaults") is True, data.get("made_up") is True)


@dataclass
class ImportTarget:
    """Import ``module`` with ``root`` first on sys.path (relative imports and package side
    effects work), instead of loading the file by path."""

    module: str
    root: Optional[str] = None

    def to_dict(self) -> JsonObject:
        return {"root": self.root, "module": self.module}

    @classmethod
    def from_dict(cls, data: Any) -> Optional["ImportTarget"]:  # (any JSON value: checked here)
        module = _text(data.get("module")) if isinstance(data, dict) else None
        return cls(module, _text(data.get("root"))) if module else None


@dataclass
class ProbeRequest:
    """What to verify and how; written by runner.verify_file, read by probe.main."""

    path: str  # the file, absolute
    result_path: str  # where the probe writes its ProbeResult
    stack_path: str  # where faulthandler writes the Python stack of a hang or a fatal signal
    deadline: float  # time.time() by which the run is killed (the probe's own stack timer, off POSIX)
    class_name: Optional[str] = None  # None: every nn.Module class the file defines
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:N" or "mps"
    init_kwargs: Optional[Dict[str, Any]] = None  # the user's constructor arguments, tried first
    input_shapes: Optional[List[InputShape]] = None
    input_exprs: Optional[List[str]] = None  # Python expressions (module namespace, torch bound) for forward
    import_target: Optional[ImportTarget] = None  # None: load the file by path
    extra_paths: List[str] = field(default_factory=list)  # folders appended to sys.path
    # Per class, after init_kwargs and the class's defaults (``before_defaults`` ones first).
    constructors: Dict[str, List[Constructor]] = field(default_factory=dict)
    # Per class, the project's calls of it, as verify.inputs finds them and probe_inputs reads
    # them: {"args": [expr], "kwargs": {name: expr}, "origin", "built_with"}.
    input_calls: Dict[str, List[JsonObject]] = field(default_factory=dict)
    ddp: bool = False  # --ddp: two training steps under DistributedDataParallel too (TL908)
    # Per class, forward's inputs from [tool.torchlint.verify.classes.<Class>]: its input-shape
    # (``shapes``, InputShape dicts) or its inputs (``exprs``); after --input-shape and --input.
    class_inputs: Dict[str, JsonObject] = field(default_factory=dict)
    # Other files of the project whose classes build this file's (a parent in file A of a class of
    # file B): {"path", "module", "constructors": {class: [Constructor dicts]}, "input_calls": {...}}.
    feeders: List[JsonObject] = field(default_factory=list)
    memory_share: float = 1.0  # of the machine's memory, that a CPU run may allocate (1: no bound)

    WIRE_NAMES = {"import_target": "import"}  # the JSON key where it differs from the field's name

    def to_dict(self) -> JsonObject:
        return {self.WIRE_NAMES.get(f.name, f.name): _to_plain(getattr(self, f.name)) for f in fields(self)}

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: JsonObject) -> "ProbeRequest":
        shapes, exprs = data.get("input_shapes"), data.get("input_exprs")
        return cls(
            path=data["path"], result_path=data["result_path"], stack_path=data["stack_path"],
            deadline=float(data["deadline"]), class_name=_text(data.get("class_name")),
            device=_text(data.get("device")) or "auto",
            init_kwargs=data.get("init_kwargs") if isinstance(data.get("init_kwargs"), dict) else None,
            input_shapes=[InputShape.from_dict(s) for s in _dicts(shapes)] or None,
            input_exprs=[e for e in exprs if isinstance(e, str)] or None if isinstance(exprs, list) else None,
            import_target=ImportTarget.from_dict(data.get("import")),
            extra_paths=[p for p in data.get("extra_paths") or [] if isinstance(p, str)],
            constructors={name: [Constructor.from_dict(c) for c in _dicts(entries)]
                          for name, entries in (data.get("constructors") or {}).items()},
            input_calls={name: _dicts(entries) for name, entries in (data.get("input_calls") or {}).items()},
            ddp=data.get("ddp") is True,
            class_inputs={name: entry for name, entry in (data.get("class_inputs") or {}).items()
                          if isinstance(entry, dict)},
            feeders=_dicts(data.get("feeders")),
            memory_share=_share(data.get("memory_share")))

    @classmethod
    def from_json(cls, text: str) -> "ProbeRequest":
        return cls.from_dict(_loads(text))


# -- the result -------------------------------------------------------------------------------------

@dataclass
class ProbeFailure:
    """Why verification could not run at all."""

    kind: Optional[str]  # "no_torch", "no_cuda", "no_class", "no_module_class"
    message: str

    def to_dict(self) -> JsonObject:
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def from_value(cls, value: object) -> Optional["ProbeFailure"]:
        if not value:
            return None
        if isinstance(value, dict):
            return cls(_text(value.get("kind")), _text(value.get("message")) or "failed")
        return cls(None, _text(value) or "failed")


@dataclass
class ProbeResult:
    """How far verification got, and what it found; the probe rewrites it after every phase."""

    finished: bool = False  # True only once every class was verified (or verification could not run)
    phase: str = "start"  # "start", "torch", "import", then per class (runner.PHASES); "done"
    current_class: Optional[str] = None  # the class the phase concerns
    python: Optional[str] = None  # the interpreter's version
    executable: Optional[str] = None
    torch_version: Optional[str] = None
    device: Optional[str] = None  # "cpu", "cuda:0"
    device_name: Optional[str] = None  # the GPU's name
    device_note: str = ""  # what the device means for the checks
    imported_as: Optional[str] = None  # the module name, or "path" (loaded by path)
    error: Optional[ProbeFailure] = None
    file_issues: List[JsonObject] = field(default_factory=list)  # TL905 for the import
    classes: List[JsonObject] = field(default_factory=list)  # one report per class, in order

    def to_dict(self) -> JsonObject:
        return {f.name: _to_plain(getattr(self, f.name)) for f in fields(self)}

    def to_json(self, default: Optional[Callable[[Any], Any]] = None) -> str:
        """``default``: text for what JSON cannot hold (a user's object in a message)."""
        return _dumps(self.to_dict(), default=default)

    @classmethod
    def from_dict(cls, data: JsonObject) -> "ProbeResult":
        return cls(finished=data.get("finished") is True, phase=_text(data.get("phase")) or "start",
                   current_class=_text(data.get("current_class")), python=_text(data.get("python")),
                   executable=_text(data.get("executable")), torch_version=_text(data.get("torch_version")),
                   device=_text(data.get("device")), device_name=_text(data.get("device_name")),
                   device_note=_text(data.get("device_note")) or "", imported_as=_text(data.get("imported_as")),
                   error=ProbeFailure.from_value(data.get("error")), file_issues=_dicts(data.get("file_issues")),
                   classes=_dicts(data.get("classes")))

    @classmethod
    def from_json(cls, text: str) -> Optional["ProbeResult"]:
        """None for what is not a JSON object."""
        data = _loads(text)
        return cls.from_dict(data) if isinstance(data, dict) else None
