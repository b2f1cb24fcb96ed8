"""The child side of ``torchlint verify``: the checks TL901-TL904 on a built module.

Loaded by ``probe.py`` by path, in the child process only (it imports torch).
Issue dicts are made by ``probe_support.new_issue``; where an attribute lives
(owner class, file, line) is worked out once per attribute by ``Locator``.
"""
from __future__ import annotations

import copy
import functools
import importlib
import io
import math
import re
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Set, Tuple

import torch
from torch import nn

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 runs this file as it is
    from typing import (Callable, Container, ContextManager, Iterable, Iterator, Literal, Optional, Sequence,
                        TypeVar, Union)

    from torch.utils.hooks import RemovableHandle

    from . import probe_support as support  # as mypy reads what probe.py loads
    from .probe_support import Run
    from .protocol import JsonObject

    _D = TypeVar("_D")  # what State.issues groups per attribute, for its message
    Holder = Tuple[str, str]  # (module prefix, attribute) of the `self.<attribute> = ...` that stored a value
    Item = Union[torch.Tensor, nn.Module]  # what a container attribute can hide from registration
else:
    support = sys.modules["torchlint_probe_support"]  # loaded by probe.py just before this file
SEVERITY_ERROR, SEVERITY_WARNING, SEVERITY_INFO = (
    support.SEVERITY_ERROR, support.SEVERITY_WARNING, support.SEVERITY_INFO)
count, listing, new_issue = support.count, support.listing, support.new_issue

MAX_CONTAINER_ITEMS = 1000  # a list of a million floats is not a list of modules
MAX_DEPTH = 3
MAX_GRAPH_NODES = 200000
MIN_STEPS, MAX_STEPS = 2, 4  # zero gates in series (a zero head, then zero layer scales) open one per step
LEARNING_RATE = 1e-2
CONTAINERS = (nn.ModuleList, nn.ModuleDict)


def describe_tensor(tensor: torch.Tensor) -> str:
    kind = "an nn.Parameter" if isinstance(tensor, nn.Parameter) else "a tensor"
    dtype = str(tensor.dtype).replace("torch.", "")
    grad = ", requires_grad" if tensor.requires_grad else ""
    return "%s (%s, shape %s%s, on %s)" % (kind, dtype, list(tensor.shape), grad, tensor.device)


def _contents(value: object, path: str, depth: int = 0) -> Iterator[Tuple[str, Item]]:
    """(path, item) for the tensors and modules inside a list/tuple/set/dict, recursively."""
    if isinstance(value, (torch.Tensor, nn.Module)):
        yield path, value
        return
    if depth >= MAX_DEPTH:
        return
    items: List[Tuple[str, object]]
    if isinstance(value, dict):
        items = [("%s[%s]" % (path, support.safe_text(repr(key), 40)), item)
                 for key, item in list(value.items())[:MAX_CONTAINER_ITEMS]]
    elif isinstance(value, (list, tuple)):
        items = [("%s[%d]" % (path, i), item) for i, item in enumerate(value[:MAX_CONTAINER_ITEMS])]
    elif isinstance(value, (set, frozenset)):
        items = [("%s[?]" % path, item) for item in list(value)[:MAX_CONTAINER_ITEMS]]
    else:
        return
    for item_path, item in items:
        for found in _contents(item, item_path, depth + 1):
            yield found


def split_path(path: str) -> Holder:
    """``a.b.weight`` -> ("a.b", "weight"): the holder of a dotted name and the name on it."""
    prefix, _, name = path.rpartition(".")
    return prefix, name


def _is_torch_class(cls: type) -> bool:
    name = getattr(cls, "__module__", "") or ""
    return name == "torch" or name.startswith("torch.")


class Locator:
    """Where an attribute of the module tree was assigned, for the issues about it.

    The owner is the nearest module (from the holder up) whose class is not torch's own;
    the line is in the verified file: the `self.<attr> = ...` of the nearest class defined
    there (an attribute of a class from another file lands on the line that stored it
    here: `self.blocks = ...`), else the verified class's line."""

    def __init__(self, modules: Dict[str, nn.Module], verified_cls: type, user_path: str) -> None:
        self.modules = modules
        self.verified_cls = verified_cls
        self.user_path = user_path
        self._cache: Dict[Tuple[str, str, bool], Tuple[JsonObject, Optional[int]]] = {}

    def locate(self, prefix: str, attribute: str, outside_init: bool = False) -> Tuple[JsonObject, Optional[int]]:
        """``outside_init``: prefer an assignment outside ``__init__`` (a layer forward creates)."""
        key = (prefix, attribute, outside_init)
        if key not in self._cache:
            self._cache[key] = self._locate(prefix, attribute, outside_init)
        return self._cache[key]

    def _locate(self, prefix: str, attribute: str, outside_init: bool) -> Tuple[JsonObject, Optional[int]]:
        parts = prefix.split(".") if prefix else []
        owner: Optional[JsonObject]
        line: Optional[int]
        owner, line = None, None
        while True:
            module = self.modules.get(".".join(parts))
            if module is not None:
                cls = type(module)
                if owner is None and not _is_torch_class(cls):
                    path = support.source_file(cls)
                    owner = {"owner_class": cls.__name__, "owner_attribute": attribute, "owner_file": path,
                             "owner_line": support.assignment_line(cls, attribute, path, outside_init)
                             if path else None}
                if line is None and support.same_file(support.source_file(cls) or "", self.user_path):
                    line = support.assignment_line(cls, attribute, self.user_path, outside_init) or \
                        support.class_line(cls, self.user_path)
            if (owner is not None and line is not None) or not parts:
                break
            attribute = parts.pop()
        if line is None:
            line = support.class_line(self.verified_cls, self.user_path)
        return owner or {"owner_class": self.verified_cls.__name__, "owner_attribute": None,
                         "owner_file": support.source_file(self.verified_cls), "owner_line": line}, line


def _torch_hook_classes() -> Tuple[type, ...]:
    """The forward pre-hooks of torch.nn.utils that set module.<name> from registered parameters
    (weight_norm, spectral_norm, prune), and ``_torch_derivation``'s names for them."""
    found: List[type] = []
    for module_name, class_name in (("torch.nn.utils.weight_norm", "WeightNorm"),
                                    ("torch.nn.utils.spectral_norm", "SpectralNorm"),
                                    ("torch.nn.utils.prune", "BasePruningMethod")):
        try:
            found.append(getattr(importlib.import_module(module_name), class_name))
        except (ImportError, AttributeError):  # another torch version: that kind is judged as any hook
            pass
    return tuple(found)


TORCH_HOOKS = _torch_hook_classes()
# hook class name -> (what the report calls it, the registered parameters it derives <name> from)
TORCH_DERIVATIONS = {"WeightNorm": ("weight_norm", ("_g", "_v")), "SpectralNorm": ("spectral_norm", ("_orig",)),
                     "BasePruningMethod": ("pruning", ("_orig",))}


def _torch_derivation(hook: object, name: str, module: nn.Module) -> Optional[str]:
    """"weight_norm" / "spectral_norm" / "pruning" when ``hook`` is that torch.nn.utils hook and
    recomputes module.<name> on every forward from parameters the module registers."""
    for cls in TORCH_HOOKS:
        if isinstance(hook, cls):
            what, suffixes = TORCH_DERIVATIONS[cls.__name__]
            target = getattr(hook, "name", None) or getattr(hook, "_tensor_name", None)
            parameters = module._parameters
            if target == name and all(isinstance(parameters.get(name + s), nn.Parameter) for s in suffixes):
                return what
    return None


def _forward_pre_hooks(module: nn.Module) -> List[object]:
    try:
        return list(module._forward_pre_hooks.values())
    except (AttributeError, TypeError):  # a module whose __init__ never ran nn.Module's
        return []


class Held:
    """A tensor the module tree holds outside its registered parameters and buffers."""

    def __init__(self, path: str, tensor: torch.Tensor, holder: Holder, derived: Optional[str] = None) -> None:
        self.path = path  # as seen from the verified module: "blocks.0.gamma_1", "layers[0].weight"
        self.tensor = tensor
        self.holder = holder  # (module prefix, attribute) of the `self.<attribute> = ...` that stored it
        # What recomputes it from registered parameters on every forward ("weight_norm"): not state
        # of its own, so not a registration bug, and a move or a step has nothing to do with it.
        self.derived = derived


class State:
    """Everything the module tree holds, registered or not, collected in one walk."""

    def __init__(self, model: nn.Module, baseline: Container[str], verified_cls: type, user_path: str) -> None:
        self.modules = dict(model.named_modules())
        self.module_ids = {id(m) for m in self.modules.values()}
        self.parameters = dict(model.named_parameters())
        self.buffers = dict(model.named_buffers())
        self.registered_ids = {id(t) for t in self.parameters.values()} | {id(t) for t in self.buffers.values()}
        self.locator = Locator(self.modules, verified_cls, user_path)
        self.verified = verified_cls.__name__
        # (holder, path, description, trainable, container) for TL901
        self.unregistered: List[Tuple[Holder, str, str, bool, bool]] = []
        self.held: List[Held] = []  # every unregistered tensor reachable
        # Plain tensor attributes of modules with a forward pre-hook of the user's: it may rebuild
        # them on every call (GradientRun.rebuilt says whether it does), path -> the module's class.
        self.hooked: Dict[str, str] = {}
        seen: Set[int] = set()

        def hold(path: str, tensor: torch.Tensor, holder: Holder, derived: Optional[str] = None) -> None:
            if id(tensor) not in seen and id(tensor) not in self.registered_ids:
                seen.add(id(tensor))
                self.held.append(Held(path, tensor, holder, derived))

        for prefix, module in self.modules.items():
            hooks = _forward_pre_hooks(module)
            for name, value in list(vars(module).items()):
                if name in baseline:
                    continue
                path = prefix + "." + name if prefix else name
                holder = (prefix, name)
                if isinstance(value, torch.Tensor):
                    derived = next((d for d in (_torch_derivation(h, name, module) for h in hooks) if d), None)
                    hold(path, value, holder, derived)
                    if derived is None:
                        self.unregistered.append((holder, path, describe_tensor(value), value.requires_grad, False))
                        if any(not isinstance(h, TORCH_HOOKS) for h in hooks):
                            self.hooked[path] = type(module).__name__
                    continue
                found = list(_contents(value, path))
                if not found:
                    continue
                lost: List[Item] = []  # modules, parameters and trainable tensors nobody registered
                for item_path, item in found:
                    if isinstance(item, nn.Module):
                        if id(item) in self.module_ids:
                            continue  # an alias of a registered submodule: nothing is lost
                        lost.append(item)
                        for sub_name, tensor in list(item.named_parameters()) + list(item.named_buffers()):
                            hold(item_path + "." + sub_name, tensor, holder)
                    else:
                        if id(item) not in self.registered_ids and (
                                isinstance(item, nn.Parameter) or item.requires_grad):
                            lost.append(item)
                        hold(item_path, item, holder)
                if lost:
                    self.unregistered.append((holder, path, describe_container(value, lost), True, True))

    def issues(self, code: str, entries: Iterable[Tuple[Holder, str, _D]],
               severity: Union[str, Callable[[List[_D]], str]], message: Callable[[List[str], List[_D]], str],
               outside_init: bool = False) -> List[JsonObject]:
        """One issue per owner attribute: 12 blocks with the same bug are one finding.

        ``entries``: (holder, path, detail); ``message(paths, details)`` words it."""
        # key -> (owner, line, its (path, detail))
        groups: Dict[Tuple[object, ...], Tuple[JsonObject, Optional[int], List[Tuple[str, _D]]]] = {}
        for holder, path, detail in entries:
            owner, line = self.locator.locate(holder[0], holder[1], outside_init)
            key = (owner["owner_class"], owner["owner_attribute"], owner["owner_file"], line)
            groups.setdefault(key, (owner, line, []))[2].append((path, detail))
        found: List[JsonObject] = []
        for owner, line, members in groups.values():
            paths = [path for path, _ in members]
            details = [detail for _, detail in members]
            level = severity(details) if callable(severity) else severity
            found.append(new_issue(code, level, message(paths, details), self.verified, paths, owner, line))
        return found


def describe_container(value: object, lost: List[Item]) -> str:
    if isinstance(value, nn.Module):
        return "the module %s, stored around nn.Module.__setattr__" % type(value).__name__
    modules = sum(1 for item in lost if isinstance(item, nn.Module))
    tensors = [item for item in lost if not isinstance(item, nn.Module)]
    what: List[str] = []
    if modules:
        what.append(count(modules, "module"))
    if tensors:
        all_parameters = all(isinstance(t, nn.Parameter) for t in tensors)
        what.append(count(len(tensors), "parameter" if all_parameters else "trainable tensor"))
    return "a plain %s holding %s" % (type(value).__name__, " and ".join(what))


def check_status(issues: List[JsonObject]) -> str:
    return "failed" if any(issue["severity"] != SEVERITY_INFO for issue in issues) else "passed"


# -- TL901 ---------------------------------------------------------------------------------------

def check_registration(state: State) -> List[JsonObject]:
    entries = [(holder, path, (description, trainable, container))
               for holder, path, description, trainable, container in state.unregistered]

    def message(paths: List[str], details: List[Tuple[str, bool, bool]]) -> str:
        description, trainable, container = details[0]
        if container and description.startswith("the module"):
            consequence = ("its parameters are not in parameters() or state_dict(), and .to()/.cuda() do not "
                           "move it (a plain `self.name = module` registers it)")
        elif container:
            consequence = ("what it holds is not in parameters() or state_dict(), and .to()/.cuda() do not "
                           "move it (nn.ModuleList / ModuleDict / ParameterList register it)")
        elif any(d[1] for d in details):
            consequence = "not in parameters(), so no optimizer trains it, and .to()/.cuda() do not move it"
        else:
            consequence = ("not in state_dict(), and .to()/.cuda() do not move it (register_buffer would; "
                           "persistent=False keeps it out of state_dict)")
        where = paths[0] if len(paths) == 1 else "%s (in %d modules)" % (listing(paths, 2), len(paths))
        return "%s is %s, a plain attribute, not registered: %s" % (where, description, consequence)

    return state.issues("TL901", entries,
                        lambda details: SEVERITY_ERROR if any(d[1] for d in details) else SEVERITY_WARNING,
                        message)


def registration_summary(found: List[JsonObject], state: State, rebuilt: Container[str] = ()) -> str:
    """TL901's line in the report, with the tensors it leaves alone because forward recomputes them."""
    text = count(len(found), "unregistered attribute") if found else "every tensor, module and parameter is registered"
    derived = [held for held in state.held if held.derived]
    if derived:
        text += "; %s recomputed from registered parameters by %s on every forward" % (
            count(len(derived), "tensor"), " and ".join(sorted({held.derived or "" for held in derived})))
    recomputed = [path for _, path, _, _, _ in state.unregistered if path in rebuilt]
    if recomputed:
        text += "; %s recomputed from registered parameters on every forward (%s)" % (
            count(len(recomputed), "tensor"), listing(recomputed, 3))
    return text


def settle_rebuilt(report: JsonObject, state: State, rebuilt: Container[str], forward_ran: bool) -> None:
    """TL901 / TL902 issues about plain tensor attributes that every forward recomputed from
    registered parameters are withdrawn: they are not state of their own. Where forward did not
    run, those on a module with a forward pre-hook of the user's are said as information, unconfirmed:
    the hook may rebuild them."""
    settled: Set[str] = set()
    kept: List[JsonObject] = []
    for issue in report["issues"]:
        paths = issue.get("paths") or []
        if issue.get("code") not in ("TL901", "TL902") or not paths:
            kept.append(issue)
        elif all(path in rebuilt for path in paths):
            settled.add(issue["code"])
        else:
            if not forward_ran and all(path in state.hooked for path in paths):
                issue["severity"] = SEVERITY_INFO
                issue["message"] += (" (unless the forward pre-hook of %s recomputes %s from registered parameters "
                                     "on every call: forward did not run, so that could not be seen)" % (
                                         state.hooked[paths[0]], "it" if len(paths) == 1 else "them"))
                settled.add(issue["code"])
            kept.append(issue)
    if not settled:
        return
    report["issues"][:] = kept
    for entry in report["checks"]:
        if entry["code"] in settled:
            found = [issue for issue in kept if issue.get("code") == entry["code"]]
            entry["status"] = check_status(found)
            if entry["code"] == "TL901":
                entry["summary"] = registration_summary(found, state, rebuilt)


def settle_followed(report: JsonObject, state: State, followed: Container[str]) -> None:
    """TL901 warnings about plain tensors, none of them trainable, that forward itself moves to its
    inputs' dtype and device (``followed``) are withdrawn: a cache the module keeps, not lost state."""
    kept = [issue for issue in report["issues"] if not (
        issue.get("code") == "TL901" and issue.get("severity") == SEVERITY_WARNING and issue.get("paths")
        and all(path in followed for path in issue["paths"]))]
    if len(kept) == len(report["issues"]):
        return
    report["issues"][:] = kept
    moved = [path for _, path, _, _, _ in state.unregistered if path in followed]
    for entry in report["checks"]:
        if entry["code"] == "TL901":
            found = [issue for issue in kept if issue.get("code") == "TL901"]
            entry["status"] = check_status(found)
            entry["summary"] = registration_summary(found, state) + (
                "; %s that forward moves to its inputs' dtype and device itself (%s)" % (
                    count(len(moved), "tensor"), listing(moved, 3)))


# -- TL902 ---------------------------------------------------------------------------------------

def tensors_to_move(state: State) -> List[Tuple[Holder, str, torch.Tensor]]:
    """Every tensor of the tree: registered ones must follow a move, and the others show that they do not."""
    items: List[Tuple[Holder, str, torch.Tensor]] = [
        (split_path(path), path, tensor) for path, tensor in state.parameters.items()]
    items += [(split_path(path), path, tensor) for path, tensor in state.buffers.items()]
    items += [(held.holder, held.path, held.tensor) for held in state.held if held.derived is None]
    return items


def check_device(state: State, device: torch.device, dtype_standin: bool) -> List[JsonObject]:
    """TL902 after model.to(device) (CUDA) or model.to(torch.float64) (the CPU stand-in)."""
    left: List[Tuple[Holder, str, str]] = []
    for holder, path, tensor in tensors_to_move(state):
        if dtype_standin:
            if tensor.is_floating_point() and tensor.dtype != torch.float64:
                left.append((holder, path, "still %s" % str(tensor.dtype).replace("torch.", "")))
        elif tensor.device != device:
            left.append((holder, path, "still on %s" % tensor.device))

    def message(paths: List[str], details: List[str]) -> str:
        verb = "was" if len(paths) == 1 else "were"
        if dtype_standin:
            return ("%s %s not converted by model.to(torch.float64) (%s), so model.to(device) leaves %s behind "
                    "too (CPU run: the dtype move stands in for the device move)" % (
                        listing(paths), verb, details[0], "it" if len(paths) == 1 else "them"))
        return "%s %s left behind by model.to(%s): %s" % (listing(paths), verb, device, details[0])

    return state.issues("TL902", left, SEVERITY_ERROR, message)


def replace_held(model: nn.Module, baseline: Container[str], change: Callable[[Item], object]) -> int:
    """Apply ``change`` to every unregistered tensor and module the tree holds, in place.

    ``change(value)`` returns the replacement (or the value itself). Plain attributes are
    re-set on their module, lists and dicts are changed in place (aliases see it), tuples rebuilt.
    Returns how many values were replaced."""
    registered = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    modules = {id(m) for m in model.modules()}
    replaced = [0]

    def visit(value: object, depth: int) -> object:
        if isinstance(value, nn.Module):
            if id(value) in modules:
                return value
            new = change(value)
        elif isinstance(value, torch.Tensor):
            if id(value) in registered:
                return value
            new = change(value)
        elif depth < MAX_DEPTH and isinstance(value, list):
            for i, item in enumerate(value[:MAX_CONTAINER_ITEMS]):
                value[i] = visit(item, depth + 1)
            return value
        elif depth < MAX_DEPTH and isinstance(value, dict):
            for key in list(value)[:MAX_CONTAINER_ITEMS]:
                value[key] = visit(value[key], depth + 1)
            return value
        elif depth < MAX_DEPTH and type(value) is tuple:
            return tuple(visit(item, depth + 1) for item in value)
        else:
            return value
        if new is not value:
            replaced[0] += 1
        return new

    for module in list(model.modules()):
        for name, value in list(vars(module).items()):
            if name in baseline:
                continue
            new = visit(value, 0)
            if new is not value:
                object.__setattr__(module, name, new)  # as the user stored it: a plain attribute
    return replaced[0]


def mover(device: torch.device) -> Callable[[Item], Item]:
    """What replace_held applies after TL902 on CUDA: what was left behind follows the device."""
    def move(value: Item) -> Item:
        if isinstance(value, nn.Module):
            return value.to(device)  # in place for modules
        if value.device == device:
            return value
        moved = value.detach().to(device)
        if isinstance(value, nn.Parameter):
            return nn.Parameter(moved, requires_grad=value.requires_grad)
        return moved.requires_grad_(value.requires_grad) if value.is_floating_point() else moved
    return move


def leaves_of(tensor: torch.Tensor, limit: int = MAX_GRAPH_NODES) -> Tuple[List[torch.Tensor], bool]:
    """The leaf tensors a non-leaf tensor was computed from (its grad_fn graph's AccumulateGrad
    variables), and whether the walk saw the whole graph."""
    leaves: List[torch.Tensor] = []
    seen: Set[int] = set()
    stack: List[object] = [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if len(seen) >= limit:
            return leaves, False
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
            continue
        for following, _ in getattr(node, "next_functions", ()) or ():
            stack.append(following)
    return leaves, True


def graph_nodes(tensor: torch.Tensor, limit: int = MAX_GRAPH_NODES) -> Set[int]:
    """ids of the autograd nodes a tensor's graph holds (at most ``limit``)."""
    seen: Set[int] = set()
    stack: List[object] = [getattr(tensor, "grad_fn", None)]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for following, _ in getattr(node, "next_functions", ()) or ():
            stack.append(following)
    return seen


def _hidden_message(paths: List[str], details: List[Tuple[Held, torch.Tensor]]) -> str:
    held, leaf = details[0]
    via = type(held.tensor.grad_fn).__name__ if held.tensor.grad_fn is not None else "an operation"
    kind = "an nn.Parameter" if isinstance(leaf, nn.Parameter) else "a leaf tensor with requires_grad"
    fix = ("nn.Parameter(t).to(...) / .double() / .cuda() returns a computed copy: wrap the converted tensor "
           "instead, nn.Parameter(t.to(...))" if isinstance(leaf, nn.Parameter) else
           "make the attribute itself an nn.Parameter")
    return ("%s is computed from %s (%s, through %s) that is not in parameters(): that leaf received a gradient "
            "in backward(), and an optimizer built from model.parameters() never updates it; %s" % (
                listing(paths), kind, describe_tensor(leaf).split(" (", 1)[-1].rstrip(")"), via, fix))


# -- TL903 / TL904: gradients over optimizer steps ------------------------------------------------

def output_tensors(value: object, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4:
        if isinstance(value, dict):
            value = list(value.values())
        elif hasattr(value, "__dataclass_fields__"):
            value = [getattr(value, name, None) for name in value.__dataclass_fields__]
        if isinstance(value, (list, tuple)):
            for item in value:
                for tensor in output_tensors(item, depth + 1):
                    yield tensor


def _has_empty_tensor(args: Iterable[object], depth: int = 0) -> bool:
    for value in args:
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            return True
        if depth < 2 and isinstance(value, (list, tuple)) and _has_empty_tensor(value, depth + 1):
            return True
    return False


class CallRecord:
    __slots__ = ("calls", "empty", "with_grad")

    def __init__(self) -> None:
        self.calls = self.empty = self.with_grad = 0


class Watch:
    """Which submodules forward called (and how), which parameters ops used under no_grad, and
    which of the tensors in ``attribute_ids`` (plain attributes, as forward began) ops read."""

    def __init__(self, modules: Dict[str, nn.Module], parameter_ids: Set[int]) -> None:
        self.records = {id(module): CallRecord() for module in modules.values()}
        self.parameter_ids = parameter_ids
        self.used_without_grad: Set[int] = set()
        self.attribute_ids: Set[int] = set()
        self.read: Set[int] = set()
        self.sees_reads = False  # a torch without TorchFunctionMode cannot say
        self._hook: Optional[RemovableHandle] = None
        self._mode: Optional[ContextManager[object]] = None  # (a TorchFunctionMode)

    def _pre_hook(self, module: nn.Module, args: Tuple[Any, ...]) -> None:
        record = self.records.get(id(module))
        if record is not None:
            record.calls += 1
            record.empty += _has_empty_tensor(args)
            record.with_grad += torch.is_grad_enabled()

    def __enter__(self) -> Watch:
        self._hook = nn.modules.module.register_module_forward_pre_hook(self._pre_hook)
        self._mode = _tensor_use_recorder(self)
        if self._mode is not None:
            self._mode.__enter__()
            self.sees_reads = True
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:  # (handed on to the mode's __exit__ as they came)
        if self._mode is not None:
            self._mode.__exit__(*exc)
        self._hook.remove()  # type: ignore[union-attr]  # (set by __enter__)
        return False

    def record(self, module: object) -> CallRecord:
        return self.records.get(id(module)) or CallRecord()


def _tensor_use_recorder(watch: Watch) -> Optional[ContextManager[object]]:
    """A torch function mode noting parameters that ops use while grad is disabled (a frozen
    teacher, an EMA copy: getting no gradient is what they are meant for), and the attribute
    tensors ops read (a new value computed from the old one carries state on)."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None

    class TensorUses(TorchFunctionMode):
        def __torch_function__(self, func: Callable[..., Any], types: Sequence[type], args: Sequence[object] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            without_grad = not torch.is_grad_enabled()
            if watch.attribute_ids or without_grad:
                values: List[object] = list(args) + list((kwargs or {}).values())
                values += [v for value in args if isinstance(value, (list, tuple)) for v in value]
                watch.read.update(id(v) for v in values if id(v) in watch.attribute_ids)
                if without_grad:
                    watch.used_without_grad.update(id(v) for v in values if id(v) in watch.parameter_ids)
            return func(*args, **(kwargs or {}))

    return TensorUses()


def _projected_loss(tensors: List[torch.Tensor], projections: Dict[Tuple[int, Tuple[int, ...]], torch.Tensor],
                    device: torch.device) -> Optional[torch.Tensor]:
    """A fixed random projection of the outputs: unlike a sum, it is not constant after a
    LayerNorm or a softmax, and it gives every output element a gradient."""
    total: Optional[torch.Tensor] = None
    for index, tensor in enumerate(tensors):
        value = tensor.real if tensor.is_complex() else tensor
        key = (index, tuple(value.shape))
        if key not in projections:
            generator = torch.Generator().manual_seed(1000 + index)
            projections[key] = torch.randn(tuple(value.shape), generator=generator).to(device)
        term = (value.float() * projections[key]).sum() / math.sqrt(max(value.numel(), 1))
        total = term if total is None else total + term
    return total


def _nonzero(grad: Optional[torch.Tensor]) -> bool:
    if grad is None:
        return False
    if grad.is_sparse:
        return grad._nnz() > 0 and bool(grad.coalesce().values().count_nonzero() > 0)
    return bool(grad.count_nonzero() > 0)


def _held_by_functions(copied: nn.Module, original: nn.Module) -> Optional[str]:
    """The attribute path of a function the copy holds (a lambda, a bound method, a partial) that
    refers to a module of the original tree: deepcopy shares functions, so the copy's forward would
    run the original's layers (``self.mlpf = lambda x: m.proj(x)`` with ``m = self.mlp``)."""
    originals = {id(m) for m in original.modules()}
    for prefix, module in copied.named_modules():
        for name, value in list(vars(module).items()):
            if name.startswith("_") or isinstance(value, (nn.Module, torch.Tensor)) or not callable(value):
                continue
            seen: List[object] = [getattr(value, "__self__", None), getattr(value, "func", None)]
            seen += list(getattr(value, "args", None) or ()) if isinstance(value, functools.partial) else []
            for cell in getattr(getattr(value, "func", value), "__closure__", None) or ():
                try:
                    seen.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    continue
            if any(isinstance(item, nn.Module) and id(item) in originals for item in seen):
                return str(prefix + "." + name if prefix else name)
    return None


class GradientRun:
    """Training as a loop runs it, on a copy: the optimizer built from the parameters before the
    first forward, then each step a fresh forward, a loss (a random projection of the outputs),
    backward() without retain_graph, step(), zero_grad(); two to four steps."""

    def __init__(self, model: nn.Module, state_of: Callable[[nn.Module], State],
                 inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run, device: torch.device) -> None:
        self.original = model
        self.note = ""
        original_state = state_of(model)
        # Non-leaf tensors cannot be deep-copied: the copy shares them (and their graph), as the
        # module itself would hold them in training.
        memo = {id(held.tensor): held.tensor for held in original_state.held
                if held.tensor.requires_grad and not held.tensor.is_leaf}
        try:
            self.model = copy.deepcopy(model, memo)
        except BaseException as exc:  # noqa: B902 - user objects may refuse to be copied
            self.model = model
            self.note = " (on the module itself: it cannot be deep-copied: %s)" % support.describe_exception(exc)
        else:
            held = _held_by_functions(self.model, model)
            if held:  # the copy's lambdas would run the original's layers: the copy trains what forward never reads
                self.model = model
                self.note = " (on the module itself: a function it holds, %s, runs its layers and is " \
                            "shared by a copy)" % held
        self.state = state_of(self.model)
        self.inputs = inputs
        self.run = run
        self.device = device
        self.trainable = [(name, p) for name, p in self.state.parameters.items() if p.requires_grad]
        self.frozen = len(self.state.parameters) - len(self.trainable)
        self.watched = [held for held in self.state.held if held.tensor.requires_grad and held.derived is None]
        known = {id(p) for p in self.state.parameters.values()} | {id(p) for p in model.parameters()}
        self.hidden = self._hidden_leaves(known)  # [(Held, leaf)]: leaves of non-leaf attributes
        self.steps = 0
        self.no_output = False
        self.failure: Optional[JsonObject] = None  # a TL905 issue: a step after the first failed
        # parameter name -> ([steps], "created" | "replaced"): parameters that forward made
        self.born: Dict[str, Tuple[List[int], str]] = {}
        self._previous: Optional[Set[int]] = None  # ids of the parameters after the last forward
        # Plain tensor attributes that every forward so far stored anew, computed from registered
        # parameters without reading the old value (a pre-hook's `module.weight = module.raw * module.gain`).
        self.rebuilt: Set[str] = set()

    def _hidden_leaves(self, known: Set[int]) -> List[Tuple[Held, torch.Tensor]]:
        found: List[Tuple[Held, torch.Tensor]]
        seen: Set[int]
        found, seen = [], set()
        for held in self.watched:
            if held.tensor.is_leaf:
                continue
            leaves, _ = leaves_of(held.tensor)
            for leaf in leaves:
                if leaf.requires_grad and id(leaf) not in known and id(leaf) not in seen:
                    seen.add(id(leaf))
                    found.append((held, leaf))
        return found

    def go(self) -> None:
        args, kwargs = self.inputs
        self.got_grad: Set[int] = set()
        self.nonzero: Set[int] = set()
        self.outside: Set[int] = set()
        self.hidden_grad: Set[int] = set()
        self.graph_attributes: List[Held] = []  # non-leaf attributes step 1's loss was computed through
        leaves = [held for held in self.watched if held.tensor.is_leaf]
        with torch.no_grad():
            before = {id(h.tensor): h.tensor.detach().clone() for h in self.watched}
        # As training builds it: from the parameters, before the first forward.
        parameters_before = dict(self.model.named_parameters())
        optimizer = torch.optim.SGD([p for _, p in self.trainable], lr=LEARNING_RATE) if self.trainable else None
        projections: Dict[Tuple[int, Tuple[int, ...]], torch.Tensor] = {}
        self.watch = Watch(self.state.modules, {id(p) for _, p in self.trainable})
        for held in leaves:
            held.tensor.grad = None
        for _, leaf in self.hidden:
            leaf.grad = None
        attributes = self._plain_attributes()
        rebuilt = set(attributes)
        for step in range(1, MAX_STEPS + 1):
            torch.manual_seed(step)  # dropout: the same masks on every run
            try:
                stored = {path: vars(module).get(name) for path, (module, name) in attributes.items()}
                self.watch.attribute_ids = {id(value) for value in stored.values() if isinstance(value, torch.Tensor)}
                self.watch.read = set()
                with torch.enable_grad(), self.watch:
                    output = self.run("forward", self.model, *args, **kwargs)
                # (Without a torch function mode, reads of the old value cannot be seen: none is rebuilt.)
                rebuilt = {path for path in rebuilt if self.watch.sees_reads and id(stored[path]) not in self.watch.read
                           and self._recomputed(stored[path], *attributes[path])}
                self.rebuilt = rebuilt
                differentiable = [t for t in output_tensors(output) if t.requires_grad and
                                  (t.is_floating_point() or t.is_complex())]
                self._note_born(parameters_before, step)
                if not differentiable:
                    self.no_output = step == 1
                    break
                loss = _projected_loss(differentiable, projections, self.device)
                assert loss is not None  # (differentiable is not empty)
                if step == 1:
                    self._note_graph(loss)
                self.run("backward", loss.backward)
            except support.UserError as failure:
                if step == 1:
                    raise
                self.failure = self._step_failure(failure, step)
                break
            self.steps = step
            new = 0
            for _, p in self.trainable:
                if p.grad is not None:
                    self.got_grad.add(id(p))
                    if id(p) not in self.nonzero and _nonzero(p.grad):
                        self.nonzero.add(id(p))
                        new += 1
            self.outside.update(id(h.tensor) for h in leaves if h.tensor.grad is not None)
            self.hidden_grad.update(id(leaf) for _, leaf in self.hidden if leaf.grad is not None)
            if optimizer is not None:
                try:
                    self.run("the optimizer step", optimizer.step)
                except support.UserError as failure:
                    if step == 1:
                        raise
                    self.failure = self._step_failure(failure, step)
                    break
                optimizer.zero_grad(set_to_none=True)
            # Another step helps only parameters of modules forward ran with grad that a zero
            # gate still shields, and only while each step opens new ones.
            waiting = [name for name, p in self.trainable if id(p) not in self.nonzero
                       and any(r.with_grad for r in self._chain(split_path(name)[0])[:1])]
            if step >= MIN_STEPS and (not waiting or not new):
                break
        with torch.no_grad():
            self.unchanged = [h for h in self.watched if h.path not in self.rebuilt
                              and torch.equal(before[id(h.tensor)], h.tensor.detach())]

    def all_zero(self) -> int:
        """How many trainable parameters got gradients that were all zero on every step: with
        guessed inputs, often the guess (a sequence of one, whose softmax is constant), not the module."""
        return sum(1 for _, p in self.trainable if id(p) in self.got_grad and id(p) not in self.nonzero)

    def _plain_attributes(self) -> Dict[str, Tuple[nn.Module, str]]:
        """path -> (module, name) of the unregistered tensors held as plain attributes of a module."""
        return {held.path: (self.state.modules[held.holder[0]], held.holder[1]) for held in self.state.held
                if held.derived is None and held.holder[0] in self.state.modules
                and held.path == ".".join(filter(None, held.holder))}

    def _recomputed(self, before: object, module: nn.Module, name: str) -> bool:
        """Did forward store a new tensor in module.<name>, computed from registered parameters
        (every autograd leaf in parameters())? (That no op read the value it replaced, a hidden
        state or a memory bank carried on through .detach(), the caller knows from the Watch.)"""
        after = vars(module).get(name)
        if not isinstance(after, torch.Tensor) or after is before or after.grad_fn is None:
            return False
        leaves, whole = leaves_of(after)
        parameters = {id(p) for _, p in self.trainable}
        return whole and bool(leaves) and all(id(leaf) in parameters for leaf in leaves)

    def _note_born(self, parameters_before: Dict[str, nn.Parameter], step: int) -> None:
        """Parameters that are not the ones the optimizer was built from (by identity), and the
        steps whose forward made them (a parameter replaced on every step shows on each)."""
        ids = {id(p) for p in parameters_before.values()}
        previous = self._previous or ids
        current = dict(self.model.named_parameters())
        for name, p in current.items():
            if id(p) in ids:
                continue
            steps, how = self.born.get(name, ([], "replaced" if name in parameters_before else "created"))
            if id(p) not in previous:
                steps.append(step)
            self.born[name] = (steps, how)
        self._previous = {id(p) for p in current.values()}

    def _note_graph(self, loss: torch.Tensor) -> None:
        nonleaf = [held for held in self.watched if not held.tensor.is_leaf]
        if not nonleaf:
            return
        nodes = graph_nodes(loss)
        self.graph_attributes = [held for held in nonleaf if id(held.tensor.grad_fn) in nodes]

    def _step_failure(self, failure: support.UserError, step: int) -> JsonObject:
        """TL905 for a step after the first: at the attribute whose graph the first backward freed,
        when the loss went through one; else where the traceback says."""
        issue = dict(failure.issue)
        issue["message"] = "step %d of training failed (step 1 ran): %s" % (step, failure.error)
        attributes = self.graph_attributes
        if not attributes:
            return issue
        entries = [(held.holder, held.path, describe_tensor(held.tensor)) for held in attributes]
        names = [path for _, path, _ in entries]

        def message(paths: List[str], details: List[str]) -> str:
            return ("step %d of training failed (step 1 ran): %s %s %s a non-leaf tensor built before training "
                    "(%s, computed from other tensors, so not an nn.Parameter): every forward uses its graph, "
                    "and the first backward() freed it, so the second backward() fails the same way in a "
                    "training loop; make it an nn.Parameter (nn.Parameter(<the same expression>)) or "
                    "compute it in forward" % (step, failure.error.rstrip(".") + ".", listing(names),
                                               "is" if len(names) == 1 else "are", details[0]))

        (placed,) = self.state.issues("TL905", entries[:1], SEVERITY_ERROR, message)[:1] or [issue]
        placed["detail"] = issue.get("detail", "")
        placed["paths"] = names
        return placed

    # -- what the run says ---------------------------------------------------------------------

    def tl903(self) -> Tuple[List[JsonObject], str]:
        state = self.state
        if self.no_output:
            issues: List[JsonObject] = []
            if self.trainable:
                issues.append(new_issue(
                    "TL903", SEVERITY_WARNING, "the output of forward() does not depend on any trainable tensor "
                    "(computed under no_grad or detached?): nothing can be trained", state.verified,
                    line=support.class_line(type(self.original), state.locator.user_path)))
            return issues, "forward ran; the output does not require grad, so there was nothing to back-propagate"
        outside = [(h.holder, h.path, describe_tensor(h.tensor)) for h in self.watched if id(h.tensor) in self.outside]
        issues = state.issues(
            "TL903", outside, SEVERITY_ERROR,
            lambda paths, details: "%s received a gradient in backward() but %s not in parameters(): "
                                   "an optimizer built from model.parameters() never updates %s" % (
                                       listing(paths), "is" if len(paths) == 1 else "are",
                                       "it" if len(paths) == 1 else "them"))
        hidden = [(h.holder, h.path, (h, leaf)) for h, leaf in self.hidden if id(leaf) in self.hidden_grad]
        issues += state.issues("TL903", hidden, SEVERITY_ERROR, _hidden_message)
        self.unused, self.idle_experts = self._unused_modules()
        issues += state.issues(
            "TL903", [(split_path(path), path, module) for path, module in self.unused], SEVERITY_INFO,
            lambda paths, details: "%s (%s) is never used in forward: its parameters get no gradient "
                                   "(DistributedDataParallel needs find_unused_parameters=True)" % (
                                       paths[0], type(details[0]).__name__))
        received = sum(1 for _, p in self.trainable if id(p) in self.nonzero)
        summary = "%d of %d trainable parameters received a gradient over %s%s; %s outside parameters() did" % (
            received, len(self.trainable), count(self.steps, "step"), self.note,
            count(len(outside) + len(hidden), "tensor"))
        if self.unused:
            summary += "; %s never used in forward" % count(len(self.unused), "submodule")
        if self.frozen:
            summary += "; %d frozen (requires_grad=False)" % self.frozen
        return issues, summary

    def tl906(self) -> Tuple[List[JsonObject], str]:
        """Parameters forward created or replaced: not the ones the optimizer was built from."""
        entries = [(split_path(name), name, (steps, how)) for name, (steps, how) in sorted(self.born.items())]

        def message(paths: List[str], details: List[Tuple[List[int], str]]) -> str:
            steps = sorted({step for made, _ in details for step in made})
            every = len(steps) > 1 and len(steps) == self.steps + (self.failure is not None)
            when = "on the first forward" if steps == [1] else "by forward on step%s %s%s" % (
                "s" if len(steps) > 1 else "", ", ".join(str(step) for step in steps), " (every step)" if every else "")
            plural = len(paths) > 1
            if all(how == "replaced" for _, how in details):
                return ("%s %s replaced by new nn.Parameter objects %s: an optimizer built from model.parameters() "
                        "before the first batch keeps updating the old %s and never the new; "
                        "DistributedDataParallel and checkpoints break too. Update the values in place "
                        "(with torch.no_grad(): p.copy_(...)) or create the parameter once in __init__" % (
                            listing(paths), "were" if plural else "was", when, "ones" if plural else "one"))
            return ("%s %s created %s, after the optimizer was built from model.parameters(): it never updates "
                    "%s, and DistributedDataParallel and a state_dict loaded before the first batch miss %s. "
                    "Create the layer in __init__ (nn.LazyLinear / nn.LazyConv2d when its width comes from the "
                    "input)" % (listing(paths), "were" if plural else "was", when, "them" if plural else "it",
                                "them" if plural else "it"))

        issues = self.state.issues("TL906", entries, SEVERITY_ERROR, message, outside_init=True)
        if not self.born:
            summary = "parameters() held the same tensors after %s as when the optimizer was built" % count(
                max(self.steps, 1), "step")
        else:
            summary = "%s not in parameters() when the optimizer was built" % count(len(self.born), "parameter")
        return issues, summary

    def tl904(self, guessed: bool = False) -> Tuple[List[JsonObject], str]:
        """``guessed``: the inputs are torchlint's only guess that fit, not the code's or the user's."""
        state = self.state
        unchanged = [(h.holder, h.path, describe_tensor(h.tensor)) for h in self.unchanged]
        issues = state.issues(
            "TL904", unchanged, SEVERITY_ERROR,
            lambda paths, details: "%s did not change after %s over model.parameters(): %s trainable but "
                                   "not in parameters()" % (
                                       listing(paths), count(self.steps, "optimizer step"),
                                       "it is" if len(paths) == 1 else "they are"))
        if self.no_output:
            return issues, "no optimizer step: the output does not require grad"
        silent = {id(p) for path, module in self.unused for p in module.parameters()}
        experts = {id(p): path for path, module in self.idle_experts for p in module.parameters()}
        dead: List[Tuple[Holder, str, bool]] = []  # (holder, name, got an all-zero gradient)
        idle: Dict[str, List[str]] = {}  # expert -> its parameters
        no_grad = 0
        for name, p in self.trainable:
            if id(p) in self.nonzero or id(p) in silent:
                continue
            holder = split_path(name)
            chain = self._chain(holder[0])
            if id(p) in experts or any(r.calls and r.empty == r.calls for r in chain):
                expert = experts.get(id(p)) or self._expert_path(holder[0])
                idle.setdefault(expert, []).append(name)
                continue
            if id(p) in self.watch.used_without_grad or (chain and chain[0].calls and not chain[0].with_grad):
                no_grad += 1
                continue
            dead.append((holder, name, id(p) in self.got_grad))
        # All-zero gradients under the only inputs torchlint could guess may be the guess's (a softmax
        # over one node or one position): information, not a warning; no gradient at all is the graph's.
        issues += state.issues(
            "TL904", dead, lambda details: SEVERITY_INFO if guessed and all(details) else SEVERITY_WARNING,
            lambda paths, details: "%s got %s in any of %s, so %s: %s%s" % (
                listing(paths), "only all-zero gradients" if all(details) else "no gradient",
                count(self.steps, "optimizer step"), "it never trains" if len(paths) == 1 else "they never train",
                "multiplied by zero, or behind a gate that stays zero?" if all(details) else
                "not used in forward, or cut from the graph by .detach() / .data?",
                " (with inputs torchlint guessed, which may be what leaves them at zero: give inputs to be sure)"
                if guessed and all(details) else ""))
        issues += state.issues(
            "TL904", [(split_path(expert), expert, names) for expert, names in idle.items()], SEVERITY_INFO,
            lambda paths, details: "%s got no gradient with these inputs: routing sent %s no tokens "
                                   "(mixture of experts); %s when a batch reaches %s" % (
                                       listing(paths), "it" if len(paths) == 1 else "them",
                                       "it trains" if len(paths) == 1 else "they train",
                                       "it" if len(paths) == 1 else "them"))
        changed = len(self.nonzero)
        summary = "%s of SGD on a copy%s: %d of %d trainable parameters got a nonzero gradient; %s outside " \
                  "parameters() did not change" % (count(self.steps, "step"), self.note, changed,
                                                   len(self.trainable), count(len(unchanged), "trainable tensor"))
        if no_grad:
            summary += "; %d used only under no_grad" % no_grad
        if idle:
            summary += "; %s got no tokens" % count(len(idle), "expert")
        return issues, summary

    def _chain(self, prefix: str) -> List[CallRecord]:
        """Call records of the module at prefix and its ancestors, nearest first."""
        parts = prefix.split(".") if prefix else []
        chain: List[CallRecord] = []
        while True:
            module = self.state.modules.get(".".join(parts))
            if module is not None:
                chain.append(self.watch.record(module))
            if not parts:
                return chain
            parts.pop()

    def _expert_path(self, prefix: str, default: Optional[str] = None) -> str:
        """The outermost module of prefix's chain that ran on an empty batch only."""
        parts = prefix.split(".") if prefix else []
        found = prefix if default is None else default
        while parts:
            record = self.watch.record(self.state.modules.get(".".join(parts)))
            if record.calls and record.empty == record.calls:
                found = ".".join(parts)
            parts.pop()
        return found

    def _unused_modules(self) -> Tuple[List[Tuple[str, nn.Module]], List[Tuple[str, nn.Module]]]:
        """(never used, idle experts): the outermost submodules with trainable parameters that
        forward never called (nor any module inside) and whose parameters got no gradient.
        An idle expert is one whose siblings in a ModuleList/ModuleDict were called."""
        modules = self.state.modules
        trainable = {id(p) for _, p in self.trainable}
        called: Set[str] = set()
        for prefix, module in modules.items():
            if self.watch.record(module).calls:
                parts = prefix.split(".") if prefix else []
                while True:
                    called.add(".".join(parts))  # a call inside counts for every module around it
                    if not parts:
                        break
                    parts.pop()
        unused: List[Tuple[str, nn.Module]] = []
        experts: List[Tuple[str, nn.Module]] = []
        for prefix, module in modules.items():
            if not prefix or prefix in called:
                continue
            if any(prefix.startswith(path + ".") for path, _ in unused + experts):
                continue
            params = [p for p in module.parameters() if id(p) in trainable]
            if not params or any(id(p) in self.got_grad for p in params):
                continue
            parent_path, _ = split_path(prefix)
            idle = self._expert_path(parent_path, default="")  # inside an expert that got an empty batch
            if idle:
                if idle not in [path for path, _ in experts]:
                    experts.append((idle, modules[idle]))
                continue
            parent = modules.get(parent_path)
            siblings = [name for name, _ in parent.named_children()] if isinstance(parent, CONTAINERS) else []
            busy = any((parent_path + "." + name if parent_path else name) in called for name in siblings)
            (experts if busy else unused).append((prefix, module))
        return unused, experts


# -- TL907 ---------------------------------------------------------------------------------------

ROUND_TRIP_SEED = 20261202  # the fresh instance's: other random initial values than the trained one's
_KEYS = re.compile(r'"([^"]+)"')


def check_round_trip(trained: nn.Module, fresh: Optional[nn.Module], inputs: Tuple[Tuple[Any, ...], Dict[str, Any]],
                     run: Run, device: torch.device,
                     state_of: Callable[[nn.Module], State]) -> Tuple[List[JsonObject], str, bool]:
    """(the issues, the check's summary, whether it was skipped). The checkpoint round trip, as a
    user meets it: the trained module's own state_dict()
    loaded into a fresh instance (built again under another seed), both in eval mode, given the
    same inputs under the same random seed, must compute the same outputs. A load that raises is
    reported with its keys; a difference with the tensors and numbers the checkpoint did not
    carry (the trained module's and the fresh one's differ there), or, when none does, as
    information: forward depends on state the checkpoint cannot hold."""
    state = state_of(trained)
    if fresh is None:
        return [], "a second instance could not be built", True
    args, kwargs = inputs
    checkpoint = trained.state_dict()
    try:
        with torch.no_grad():
            fresh.to(device)
            fresh.load_state_dict(checkpoint)
    except Exception as exc:  # noqa: B902 - torch's own refusal, "Unexpected key(s)...", or the user's hook
        text = str(exc).strip()
        known = set(checkpoint) | set(fresh.state_dict())
        keys = [key for key in _KEYS.findall(text) if key in known]  # (the keys torch's message quotes)
        entries = [(split_path(key), key, "") for key in dict.fromkeys(keys)] or [(("", ""), "", "")]
        kind = type(exc).__name__  # (the name `exc` is unbound once the handler ends)
        said = " ".join(line.strip() for line in text.splitlines()) if text else kind
        message = ("loading the trained module's own state_dict() into a new instance raises %s: %s; a "
                   "checkpoint of this module cannot be loaded back (a buffer or parameter made outside __init__, "
                   "or registered as None then filled?)" % (kind, said[:300]))
        return state.issues("TL907", entries[:8], SEVERITY_ERROR, lambda paths, details: message), \
            "load_state_dict raised", False
    modes = trained.training, fresh.training
    trained.eval()
    fresh.eval()
    try:
        # Each forward on a copy of its own where one can be made: a forward that updates state
        # in place (a decay, a counter) then starts from the same state each time.
        outputs = []
        for model in (trained, trained, fresh):
            torch.manual_seed(ROUND_TRIP_SEED)
            with torch.no_grad():
                outputs.append(list(output_tensors(run("forward", _copy_or_itself(model), *args, **kwargs))))
    except support.UserError as failure:  # (eval mode takes other paths: not this check's to report)
        return [], "forward in eval mode failed: %s" % failure.error, True
    finally:
        trained.train(modes[0])
        fresh.train(modes[1])
    first, again, loaded = outputs
    if not _same_outputs(first, again):
        return [], "in eval mode, forward gives other outputs for the same inputs and seed", True
    if _same_outputs(first, loaded):
        return [], "the trained module's state_dict(), loaded into a new instance, gives the same outputs", False
    lost = _not_carried(state, state_of(fresh), trained, fresh)
    if lost:
        return state.issues(
            "TL907", lost, SEVERITY_ERROR,
            lambda paths, details: "%s %s not in state_dict(): loaded back from a checkpoint of the trained "
                                   "module, a new instance computes other outputs (%s)" % (
                                       listing(paths), "is" if len(paths) == 1 else "are",
                                       "; ".join(sorted(set(details)))[:300])), \
            "a checkpoint loses what forward computes with", False
    found = [new_issue("TL907", SEVERITY_INFO,
                       "loaded back from a checkpoint of the trained module, a new instance computes other outputs, "
                       "though every tensor and number it holds was carried: forward depends on state state_dict() "
                       "cannot hold (a Python object, a global, a file)", state.verified,
                       line=support.class_line(type(trained), state.locator.user_path))]
    return found, "outputs differ after loading; nothing the module holds explains it", False


# Kernels of another device round differently (cuDNN convolutions use TF32 by default): outputs
# across devices are compared by their relative size of difference, not element by element.
ACROSS_DEVICES_TOLERANCE = 1e-2
_DEVICE_WORDS = re.compile(r"\bdevices?\b|\bcuda\b|\bmps\b", re.IGNORECASE)


def check_across_devices(trained: nn.Module, fresh: Optional[nn.Module],
                         inputs: Tuple[Tuple[Any, ...], Dict[str, Any]],
                         moved_inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run, device: torch.device,
                         target: torch.device, state_of: Callable[[nn.Module], State]) -> Tuple[List[JsonObject], str, bool]:
    """(the issues, the check's summary, whether it was skipped). The round trip across devices, as
    a model trained on the GPU and served on a CPU meets it: the trained module's state_dict(),
    written by torch.save on ``device`` and read back with ``map_location=target``, is loaded into
    a new instance built on ``target``; given the same inputs moved there, its forward must run
    and compute what the trained module computes on ``device``. A forward that fails only there is
    a device written into the module (``torch.ones(n, device="cuda")``, ``.cuda()`` in forward)."""
    state = state_of(trained)
    if fresh is None:
        return [], "a second instance could not be built", True
    where = "saved on %s, read back on %s" % (device, target)
    try:
        buffer = io.BytesIO()
        torch.save(trained.state_dict(), buffer)
        checkpoint = _read_back(buffer, target)
        with torch.no_grad():
            fresh.to(target)
            fresh.load_state_dict(checkpoint)
    except Exception as exc:  # noqa: B902 - the same-device round trip reports a load that raises
        return [], "%s: the checkpoint could not be loaded (%s)" % (where, type(exc).__name__), True
    modes = trained.training, fresh.training
    trained.eval()
    fresh.eval()
    try:
        torch.manual_seed(ROUND_TRIP_SEED)
        with torch.no_grad():
            expected = list(output_tensors(run("forward", _copy_or_itself(trained), *inputs[0], **inputs[1])))
        torch.manual_seed(ROUND_TRIP_SEED)
        try:
            with torch.no_grad():
                loaded = list(output_tensors(run("forward", _copy_or_itself(fresh), *moved_inputs[0],
                                                 **moved_inputs[1])))
        except support.UserError as failure:
            return _failed_on_target(failure, state, where, type(trained)), "%s: forward failed" % where, False
    except support.UserError as failure:  # forward on the first device: the same-device check's to report
        return [], "forward in eval mode failed: %s" % failure.error, True
    finally:
        trained.train(modes[0])
        fresh.train(modes[1])
    if _same_outputs(expected, loaded, _close_in_size):
        return [], "%s: the same outputs" % where, False
    found = [new_issue("TL907", SEVERITY_INFO,
                       "%s, the trained module's checkpoint computes other outputs than on %s (beyond the "
                       "rounding of another device's kernels): forward depends on the device it runs on" % (
                           where, device), state.verified,
                       line=support.class_line(type(trained), state.locator.user_path))]
    return found, "%s: other outputs" % where, False


def _read_back(buffer: io.BytesIO, target: torch.device) -> Dict[str, Any]:
    """A checkpoint read as a user reads one on another machine; extra state (get_extra_state)
    may hold objects weights_only refuses, and these bytes are the probe's own."""
    for weights_only in (True, False):
        buffer.seek(0)
        try:
            loaded: Dict[str, Any] = torch.load(buffer, map_location=target, weights_only=weights_only)
            return loaded
        except Exception:  # noqa: B902 - weights_only's refusal: read it in full
            if not weights_only:
                raise
    raise AssertionError("unreachable")


def _failed_on_target(failure: support.UserError, state: State, where: str, cls: type) -> List[JsonObject]:
    """A forward that ran on the training device and fails on ``target``: a warning when the
    error names a device, information otherwise (an operation the other device lacks)."""
    named_device = bool(_DEVICE_WORDS.search(failure.error))
    line = failure.issue.get("line") or support.class_line(cls, state.locator.user_path)
    message = ("%s, the trained module's checkpoint does not run: forward raises %s%s" % (
        where, failure.error[:300],
        "; a device is written into the module (create tensors on the input's or a parameter's device)"
        if named_device else ""))
    return [new_issue("TL907", SEVERITY_WARNING if named_device else SEVERITY_INFO, message, state.verified,
                      line=line)]


def _close_in_size(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The difference small beside the values as a whole (NaN is not close)."""
    if not a.numel():
        return True
    wide = torch.complex128 if a.is_complex() else torch.float64
    scale = float(torch.linalg.vector_norm(a.to(wide)))
    difference = float(torch.linalg.vector_norm(a.to(wide) - b.to(wide)))
    return difference <= ACROSS_DEVICES_TOLERANCE * scale + 1e-6 * math.sqrt(a.numel())


def _copy_or_itself(model: nn.Module) -> nn.Module:
    try:
        return copy.deepcopy(model)
    except BaseException:  # noqa: B902 - user objects may refuse to be copied
        return model


def _close_elementwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)


def _same_outputs(first: List[torch.Tensor], second: List[torch.Tensor],
                  close: Callable[[torch.Tensor, torch.Tensor], bool] = _close_elementwise) -> bool:
    """Same shapes and dtypes, equal integers, floats ``close`` (meta tensors: shapes only)."""
    if len(first) != len(second):
        return False
    for a, b in zip(first, second):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_meta or b.is_meta:
            continue  # a meta tensor has no values
        b = b.to(a.device)
        if not (close(a, b) if a.is_floating_point() or a.is_complex() else torch.equal(a, b)):
            return False
    return True


def _not_carried(trained_state: State, fresh_state: State, trained: nn.Module,
                 fresh: nn.Module) -> List[Tuple[Holder, str, str]]:
    """(holder, path, what) of the plain tensors and numbers the two instances hold differently."""
    fresh_held = {held.path: held.tensor for held in fresh_state.held}
    lost: List[Tuple[Holder, str, str]] = []
    for held in trained_state.held:
        if held.derived is not None:
            continue
        other = fresh_held.get(held.path)
        with torch.no_grad():
            same = other is not None and other.shape == held.tensor.shape and other.dtype == held.tensor.dtype \
                and torch.equal(other.to(held.tensor.device), held.tensor)
        if not same:
            lost.append((held.holder, held.path, "a plain tensor: the new instance keeps its own value"))
    fresh_modules = dict(fresh.named_modules())
    for prefix, module in trained.named_modules():
        counterpart = fresh_modules.get(prefix)
        if counterpart is None:
            continue
        for name, value in vars(module).items():
            if name == "training" or name.startswith("_") or isinstance(value, bool) \
                    or not isinstance(value, (int, float)):
                continue
            if vars(counterpart).get(name) != value:
                path = prefix + "." + name if prefix else name
                lost.append(((prefix, name), path, "a Python number (%r after training, %r new)" % (
                    value, vars(counterpart).get(name))))
    return lost
