"""The child side of ``torchlint verify``: describing what the user's code did, safely.

Loaded by ``probe.py`` by path (the child may not have torchlint installed), so it
uses the standard library only. Nothing here may raise while describing a failure:
user code can raise any BaseException, including one whose ``str()`` raises.
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import sys
import traceback
from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 runs this file as it is
    from types import TracebackType
    from typing import Callable, Iterable, List, Mapping, Protocol, Sequence, Type, TypeVar

    from .protocol import JsonObject

    _T = TypeVar("_T")

    class Run(Protocol):
        """run_user with what is being done (and for whom) already bound: probe.verify_class's ``run``."""

        def __call__(self, doing: str, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T: ...

SEVERITY_ERROR, SEVERITY_WARNING, SEVERITY_INFO = "error", "warning", "info"
PROBE_FOLDER = os.path.dirname(os.path.abspath(__file__))
MAX_MESSAGE = 600


# -- the memory a run may take -------------------------------------------------------------------

_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory() -> Optional[int]:
    """Bytes of memory this process's machine has: its physical memory, or its container's limit
    when that is lower (cgroup v2, then v1). None where neither can be read."""
    try:
        total: Optional[int] = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        total = None
    for path in _CGROUP_LIMITS:
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)  # v1 says "unlimited" with a huge number: never below the machine's
    return total


def bound_memory(share: float) -> Optional[int]:
    """Let this process allocate at most ``share`` of the machine's memory (RLIMIT_DATA, which
    counts the heap and private mappings, not the address space that CUDA reserves): past it
    malloc fails, and torch raises "not enough memory" where the machine would swap or the kernel
    kill something else. Returns the bound in bytes, or None when there is none (share 1, no
    resource limits on this system, a lower one already set)."""
    total = machine_memory()
    if share >= 1 or total is None:
        return None
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    limit = int(total * share)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        return None
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (OSError, ValueError):
        return None
    return limit


# -- text that never raises --------------------------------------------------------------------

def safe_text(value: object, limit: int = MAX_MESSAGE) -> str:
    """str(value), else repr(value), else a placeholder: user objects may raise in either."""
    for render in (str, repr):
        try:
            text = render(value)
            if isinstance(text, str):
                return text if len(text) <= limit else text[:limit] + "..."
        except BaseException:  # noqa: B902 - a user's __str__ may raise anything
            pass
    return "<%s object that cannot be printed>" % type_name(value)


def type_name(value: object) -> str:
    try:
        return type(value).__name__
    except BaseException:  # noqa: B902
        return "object"


def describe(args: Iterable[object], kwargs: Mapping[str, object]) -> str:
    """Example inputs as the report names them: ``(2, 16) float32, mask=(2, 16) bool``."""
    import torch

    def one(value: object, depth: int = 0) -> str:
        if isinstance(value, torch.Tensor):
            return "%s %s" % (tuple(value.shape), str(value.dtype).replace("torch.", ""))
        if isinstance(value, dict) and depth < 2 and 0 < len(value) <= 6 and all(isinstance(k, str) for k in value):
            return "{%s}" % ", ".join("%s: %s" % (k, one(v, depth + 1)) for k, v in value.items())
        return type_name(value)

    parts = [one(a) for a in args] + ["%s=%s" % (k, one(v)) for k, v in kwargs.items()]
    return ", ".join(parts) or "no arguments"


def describe_exception(exc: BaseException) -> str:
    """`KeyError: 'dim'`, `the module's code called sys.exit(3)`, `RecursionError: ...`."""
    try:
        if isinstance(exc, SystemExit):
            return "the module's code called sys.exit(%s)" % safe_text(exc.code, 80)
        if isinstance(exc, KeyboardInterrupt):
            return "KeyboardInterrupt raised by the module's code"
        if isinstance(exc, GeneratorExit):
            return "GeneratorExit raised by the module's code"
        text = safe_text(exc).strip()
        name = type_name(exc)
        tried = _ALLOCATION.search(text)
        if tried:  # torch's own words are an assertion's: "[enforce fail at alloc_cpu.cpp:127] err == 0 ..."
            return ("%s: out of memory: tried to allocate %.1f GiB more, past what this run may take "
                    "(--memory-share, verify.memoryShare)" % (name, int(tried.group(1)) / 2 ** 30))
        return "%s: %s" % (name, text) if text else name
    except BaseException:  # noqa: B902
        return "an exception that cannot be described"


_ALLOCATION = re.compile(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): "
                         r"you tried to allocate (\d+) bytes")


def format_traceback(exc: BaseException, tb: Optional[TracebackType]) -> str:
    try:
        lines = traceback.format_exception(type(exc), exc, tb)
        return "".join(lines[-12:]).rstrip()
    except BaseException:  # noqa: B902 - formatting calls the exception's __str__
        try:
            rows = traceback.format_list(traceback.extract_tb(tb)[-10:])
            return ("Traceback (most recent call last):\n" + "".join(rows) + describe_exception(exc)).rstrip()
        except BaseException:  # noqa: B902
            return ""


# -- files and lines --------------------------------------------------------------------------------

def same_file(a: str, b: str) -> bool:
    try:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
    except (OSError, ValueError, TypeError):
        return False


def in_probe(filename: str) -> bool:
    try:
        return os.path.dirname(os.path.abspath(filename)) == PROBE_FOLDER
    except (TypeError, ValueError):
        return False


def user_line(exc: BaseException, user_path: str) -> Tuple[Optional[int], Optional[str]]:
    """(line, function) of the innermost frame of the traceback in the user's file."""
    try:
        if isinstance(exc, SyntaxError) and exc.filename and same_file(exc.filename, user_path):
            return exc.lineno, None
        found: Tuple[Optional[int], Optional[str]] = (None, None)
        for frame in traceback.extract_tb(exc.__traceback__):
            if same_file(frame.filename, user_path):
                found = (frame.lineno, frame.name)
        return found
    except BaseException:  # noqa: B902
        return None, None


def source_file(cls: type) -> Optional[str]:
    try:
        return inspect.getsourcefile(cls)
    except BaseException:  # noqa: B902 - builtins, classes made by exec(), odd metaclasses
        return None


_TREES: Dict[str, Optional[ast.Module]] = {}


def _tree(path: str) -> Optional[ast.Module]:
    if path not in _TREES:
        try:
            with open(path, "rb") as handle:
                _TREES[path] = ast.parse(handle.read(), path)
        except (OSError, SyntaxError, ValueError):
            _TREES[path] = None
    return _TREES[path]


def class_line(cls: type, path: str) -> Optional[int]:
    """The line of `class Name` in ``path`` for cls (None when cls is not defined there)."""
    if not same_file(source_file(cls) or "", path):
        return None
    tree = _tree(path)
    if tree is None:
        return None
    qualname = getattr(cls, "__qualname__", "") or ""
    name = getattr(cls, "__name__", "")
    first = getattr(cls, "__firstlineno__", None)  # Python 3.13+
    candidates = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == name]
    if first is not None:
        for node in candidates:
            if node.lineno == first or any(d.lineno == first for d in node.decorator_list):
                return node.lineno
    top = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    if "." not in qualname and top:
        return top[-1].lineno  # the last definition is the one the module holds
    return candidates[0].lineno if candidates else None


def _class_node(cls: type, path: str) -> Optional[ast.ClassDef]:
    line = class_line(cls, path)
    if line is None:
        return None
    tree = _tree(path)
    assert tree is not None  # (class_line found the class in it)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno == line:
            return node
    return None


def _stores(node: ast.stmt, attribute: str) -> bool:
    """Does this statement store `self.<attribute>` (assignment, register_*, setattr)?"""
    targets: List[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    for target in targets:
        for part in ast.walk(target):
            if (isinstance(part, ast.Attribute) and part.attr == attribute
                    and isinstance(part.value, ast.Name) and part.value.id == "self"):
                return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        func = call.func
        named = (isinstance(func, ast.Attribute) and func.attr in (
            "register_buffer", "register_parameter", "add_module", "register_module")) or (
            isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) >= 2)
        args = call.args[1:] if isinstance(func, ast.Name) else call.args
        if named and args and isinstance(args[0], ast.Constant) and args[0].value == attribute:
            return True
    return False


# (class of the instance, attribute name) -> the (file, line) of the statements that stored it
# while an instance was built (Assignments): the branch that ran, where the source has several.
ASSIGNED: Dict[Tuple[type, str], Set[Tuple[str, int]]] = {}
MAX_LINES_PER_ATTRIBUTE = 8


class Assignments:
    """While the user's class is built: every ``module.<name> = value`` an nn.Module's
    ``__setattr__`` sees is noted in ASSIGNED with the statement that did it (the first frame
    outside ``__setattr__`` methods). The patch is removed on exit; it never changes what is stored."""

    def __init__(self, module_class: Any) -> None:
        self.module_class = module_class
        self.original: Any = None

    def __enter__(self) -> "Assignments":
        original = self.module_class.__setattr__
        self.original = original

        def __setattr__(module: Any, name: str, value: Any) -> None:
            try:
                frame: Any = sys._getframe(1)
                while frame is not None and frame.f_code.co_name == "__setattr__":
                    frame = frame.f_back
                if frame is not None:
                    lines = ASSIGNED.setdefault((type(module), name), set())
                    if len(lines) < MAX_LINES_PER_ATTRIBUTE:
                        lines.add((frame.f_code.co_filename, frame.f_lineno))
            except Exception:  # noqa: BLE001 - noting never stops the assignment
                pass
            original(module, name, value)

        self.module_class.__setattr__ = __setattr__
        return self

    def __exit__(self, *exc: object) -> None:
        self.module_class.__setattr__ = self.original


def _ran_at(cls: type, attribute: str, path: str) -> Optional[int]:
    """The one line of ``path`` that stored the attribute on instances of ``cls`` while they were
    built (None: not seen, or several lines did)."""
    lines = {line for file, line in ASSIGNED.get((cls, attribute), ()) if same_file(file, path)}
    return next(iter(lines)) if len(lines) == 1 else None


def assignment_line(cls: type, attribute: Optional[str], path: str, outside_init: bool = False) -> Optional[int]:
    """The line of `self.<attribute> = ...` in cls or its bases defined in ``path`` (__init__ first;
    with ``outside_init``, another method first: where forward creates it). The statement that ran
    while the instance was built wins over the first one in the source (``if learn: nn.Parameter
    ... else: a plain tensor``)."""
    if not attribute:
        return None
    if not outside_init:
        ran = _ran_at(cls, attribute, path)
        if ran is not None:
            return ran
    try:
        mro: Tuple[type, ...] = inspect.getmro(cls)
    except BaseException:  # noqa: B902
        mro = (cls,)
    for klass in mro:
        node = _class_node(klass, path)
        if node is None:
            continue
        found: List[Tuple[bool, int]] = []  # (not the preferred kind of method, line)
        for function in node.body:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for statement in ast.walk(function):
                if isinstance(statement, ast.stmt) and _stores(statement, attribute):
                    found.append(((function.name == "__init__") if outside_init else (function.name != "__init__"),
                                  statement.lineno))
        if found:
            return min(found)[1]
    return None


# -- failures of user code ------------------------------------------------------------------------

class UserError(Exception):
    """A failure of the user's code, already described as a TL905 issue."""

    def __init__(self, issue: JsonObject, stage: str, error: str,
                 exception_type: Type[BaseException] = Exception, exception: Optional[BaseException] = None) -> None:
        Exception.__init__(self, issue["message"])
        self.issue = issue
        self.stage = stage  # what was being done: "Net.forward", "constructing Net()"...
        self.error = error  # the exception, in words
        self.exception_type = exception_type
        self.exception = exception  # what the user's code raised, with its traceback

    @property
    def always_a_bug(self) -> bool:
        """Not a sign of inputs that do not fit: exits, interrupts, runaway recursion."""
        return not issubclass(self.exception_type, Exception) or issubclass(self.exception_type, RecursionError)


def failure_issue(exc: BaseException, doing: str, verified: Optional[str], user_path: str,
                  fallback_line: Optional[int] = None) -> JsonObject:
    """A TL905 issue for anything user code raised, with the innermost line in the user's file."""
    line, function = user_line(exc, user_path)
    where = ""
    if line:
        where = " (line %d%s)" % (line, ", in %s" % function if function and function != "<module>" else "")
    # The traceback from the user's side: not the probe's frames, nor importlib's.
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None and (
                in_probe(tb.tb_frame.f_code.co_filename)
                or tb.tb_frame.f_code.co_filename.startswith("<frozen importlib")):
            tb = tb.tb_next
    except BaseException:  # noqa: B902
        tb = None
    issue = new_issue("TL905", SEVERITY_ERROR, "%s failed%s: %s" % (doing, where, describe_exception(exc)),
                      verified)
    issue["line"] = line or fallback_line
    issue["detail"] = format_traceback(exc, tb)
    return issue


def run_user(doing: str, verified: Optional[str], user_path: str, function: Callable[..., _T], *args: Any,
             **kwargs: Any) -> _T:
    """Call user code; anything it raises (SystemExit, KeyboardInterrupt too) becomes a UserError."""
    try:
        return function(*args, **kwargs)
    except BaseException as exc:  # noqa: B902 - hostile code may raise anything
        issue = failure_issue(exc, doing, verified, user_path)
        raise UserError(issue, doing, describe_exception(exc), type(exc), exc) from None


# -- issues --------------------------------------------------------------------------------------------

def new_issue(code: str, severity: str, message: str, verified: Optional[str], paths: Sequence[str] = (),
              owner: Optional[Mapping[str, Any]] = None, line: Optional[int] = None) -> JsonObject:
    """One issue dict as the parent reads it (an entry of protocol.ProbeResult; report.Issue.from_dict).

    ``owner``: a dict with owner_class, owner_attribute, owner_file, owner_line."""
    owner = owner or {}
    return {
        "code": code,
        "class": verified,  # the class that was verified
        "attribute": paths[0] if paths else None,  # dotted path from the verified module
        "paths": list(paths),
        "owner_class": owner.get("owner_class"),
        "owner_attribute": owner.get("owner_attribute"),
        "owner_file": owner.get("owner_file"),
        "owner_line": owner.get("owner_line"),
        "line": line,
        "severity": severity,
        "message": message,
        "detail": "",
    }


def count(number: int, noun: str) -> str:
    return "%d %s%s" % (number, noun, "" if number == 1 else "s")


def listing(paths: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (" and %d more" % (len(paths) - limit) if len(paths) > limit else "")
