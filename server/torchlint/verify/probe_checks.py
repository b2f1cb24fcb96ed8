"""The child side of ``torchlint verify``: the checks TL901-TL904 on a built module.

Loaded by ``probe.py`` by path, in the child process only (it imports torch).
Issue dicts are made by ``probe_support.new_issue``; where an attribute lives
(owner class, file, line) is worked out once per attribute by ``Locator``.
"""
import copy
import math
import sys
import warnings

import torch
from torch import nn

support = sys.modules["torchlint_probe_support"]  # loaded by probe.py just before this file
SEVERITY_ERROR, SEVERITY_WARNING, SEVERITY_INFO = (
    support.SEVERITY_ERROR, support.SEVERITY_WARNING, support.SEVERITY_INFO)
count, listing, new_issue = support.count, support.listing, support.new_issue

MAX_CONTAINER_ITEMS = 1000  # a list of a million floats is not a list of modules
MAX_DEPTH = 3
MIN_STEPS, MAX_STEPS = 2, 4  # zero gates in series (a zero head, then zero layer scales) open one per step
LEARNING_RATE = 1e-2
CONTAINERS = (nn.ModuleList, nn.ModuleDict)


def describe_tensor(tensor):
    kind = "an nn.Parameter" if isinstance(tensor, nn.Parameter) else "a tensor"
    dtype = str(tensor.dtype).replace("torch.", "")
    grad = ", requires_grad" if tensor.requires_grad else ""
    return "%s (%s, shape %s%s, on %s)" % (kind, dtype, list(tensor.shape), grad, tensor.device)


def _contents(value, path, depth=0):
    """(path, item) for the tensors and modules inside a list/tuple/set/dict, recursively."""
    if isinstance(value, (torch.Tensor, nn.Module)):
        yield path, value
        return
    if depth >= MAX_DEPTH:
        return
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


def _split(path):
    prefix, _, name = path.rpartition(".")
    return prefix, name


def _is_torch_class(cls):
    name = getattr(cls, "__module__", "") or ""
    return name == "torch" or name.startswith("torch.")


class Locator:
    """Where an attribute of the module tree was assigned, for the issues about it.

    The owner is the nearest module (from the holder up) whose class is not torch's own;
    the line is in the verified file: the `self.<attr> = ...` of the nearest class defined
    there (an attribute of a class from another file lands on the line that stored it
    here: `self.blocks = ...`), else the verified class's line."""

    def __init__(self, modules, verified_cls, user_path):
        self.modules = modules
        self.verified_cls = verified_cls
        self.user_path = user_path
        self._cache = {}

    def locate(self, prefix, attribute):
        key = (prefix, attribute)
        if key not in self._cache:
            self._cache[key] = self._locate(prefix, attribute)
        return self._cache[key]

    def _locate(self, prefix, attribute):
        parts = prefix.split(".") if prefix else []
        owner, line = None, None
        while True:
            module = self.modules.get(".".join(parts))
            if module is not None:
                cls = type(module)
                if owner is None and not _is_torch_class(cls):
                    path = support.source_file(cls)
                    owner = {"owner_class": cls.__name__, "owner_attribute": attribute, "owner_file": path,
                             "owner_line": support.assignment_line(cls, attribute, path) if path else None}
                if line is None and support.same_file(support.source_file(cls) or "", self.user_path):
                    line = support.assignment_line(cls, attribute, self.user_path) or support.class_line(
                        cls, self.user_path)
            if (owner is not None and line is not None) or not parts:
                break
            attribute = parts.pop()
        if line is None:
            line = support.class_line(self.verified_cls, self.user_path)
        return owner or {"owner_class": self.verified_cls.__name__, "owner_attribute": None,
                         "owner_file": support.source_file(self.verified_cls), "owner_line": line}, line


class Held:
    """A tensor the module tree holds outside its registered parameters and buffers."""

    def __init__(self, path, tensor, holder):
        self.path = path  # as seen from the verified module: "blocks.0.gamma_1", "layers[0].weight"
        self.tensor = tensor
        self.holder = holder  # (module prefix, attribute) of the `self.<attribute> = ...` that stored it


class State:
    """Everything the module tree holds, registered or not, collected in one walk."""

    def __init__(self, model, baseline, verified_cls, user_path):
        self.modules = dict(model.named_modules())
        self.module_ids = {id(m) for m in self.modules.values()}
        self.parameters = dict(model.named_parameters())
        self.buffers = dict(model.named_buffers())
        self.registered_ids = {id(t) for t in self.parameters.values()} | {id(t) for t in self.buffers.values()}
        self.locator = Locator(self.modules, verified_cls, user_path)
        self.verified = verified_cls.__name__
        self.unregistered = []  # (holder, path, description, trainable, container) for TL901
        self.held = []  # every unregistered tensor reachable, as Held
        seen = set()

        def hold(path, tensor, holder):
            if id(tensor) not in seen and id(tensor) not in self.registered_ids:
                seen.add(id(tensor))
                self.held.append(Held(path, tensor, holder))

        for prefix, module in self.modules.items():
            for name, value in list(vars(module).items()):
                if name in baseline:
                    continue
                path = prefix + "." + name if prefix else name
                holder = (prefix, name)
                if isinstance(value, torch.Tensor):
                    hold(path, value, holder)
                    self.unregistered.append((holder, path, describe_tensor(value), value.requires_grad, False))
                    continue
                found = list(_contents(value, path))
                if not found:
                    continue
                lost = []  # modules, parameters and trainable tensors nobody registered
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

    def issues(self, code, entries, severity, message):
        """One issue per owner attribute: 12 blocks with the same bug are one finding.

        ``entries``: (holder, path, detail); ``message(paths, details)`` words it."""
        groups = {}
        for holder, path, detail in entries:
            owner, line = self.locator.locate(*holder)
            key = (owner["owner_class"], owner["owner_attribute"], owner["owner_file"], line)
            groups.setdefault(key, (owner, line, []))[2].append((path, detail))
        found = []
        for owner, line, members in groups.values():
            paths = [path for path, _ in members]
            details = [detail for _, detail in members]
            level = severity(details) if callable(severity) else severity
            found.append(new_issue(code, level, message(paths, details), self.verified, paths, owner, line))
        return found


def describe_container(value, lost):
    if isinstance(value, nn.Module):
        return "the module %s, stored around nn.Module.__setattr__" % type(value).__name__
    modules = sum(1 for item in lost if isinstance(item, nn.Module))
    tensors = [item for item in lost if not isinstance(item, nn.Module)]
    what = []
    if modules:
        what.append(count(modules, "module"))
    if tensors:
        all_parameters = all(isinstance(t, nn.Parameter) for t in tensors)
        what.append(count(len(tensors), "parameter" if all_parameters else "trainable tensor"))
    return "a plain %s holding %s" % (type(value).__name__, " and ".join(what))


def check_status(issues):
    return "failed" if any(issue["severity"] != SEVERITY_INFO for issue in issues) else "passed"


# -- TL901 ---------------------------------------------------------------------------------------

def check_registration(state):
    entries = [(holder, path, (description, trainable, container))
               for holder, path, description, trainable, container in state.unregistered]

    def message(paths, details):
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


# -- TL902 ---------------------------------------------------------------------------------------

def tensors_to_move(state):
    """Every tensor of the tree: registered ones must follow a move, and the others show that they do not."""
    items = [(_split(path), path, tensor) for path, tensor in state.parameters.items()]
    items += [(_split(path), path, tensor) for path, tensor in state.buffers.items()]
    items += [(held.holder, held.path, held.tensor) for held in state.held]
    return items


def check_device(state, device, dtype_standin):
    """TL902 after model.to(device) (CUDA) or model.to(torch.float64) (the CPU stand-in)."""
    left = []
    for holder, path, tensor in tensors_to_move(state):
        if dtype_standin:
            if tensor.is_floating_point() and tensor.dtype != torch.float64:
                left.append((holder, path, "still %s" % str(tensor.dtype).replace("torch.", "")))
        elif tensor.device != device:
            left.append((holder, path, "still on %s" % tensor.device))

    def message(paths, details):
        verb = "was" if len(paths) == 1 else "were"
        if dtype_standin:
            return ("%s %s not converted by model.to(torch.float64) (%s), so model.to(device) leaves %s behind "
                    "too (CPU run: the dtype move stands in for the device move)" % (
                        listing(paths), verb, details[0], "it" if len(paths) == 1 else "them"))
        return "%s %s left behind by model.to(%s): %s" % (listing(paths), verb, device, details[0])

    return state.issues("TL902", left, SEVERITY_ERROR, message)


def replace_held(model, baseline, change):
    """Apply ``change`` to every unregistered tensor and module the tree holds, in place.

    ``change(value)`` returns the replacement (or the value itself). Plain attributes are
    re-set on their module, lists and dicts are changed in place (aliases see it), tuples rebuilt.
    Returns how many values were replaced."""
    registered = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    modules = {id(m) for m in model.modules()}
    replaced = [0]

    def visit(value, depth):
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


def mover(device):
    """What replace_held applies after TL902 on CUDA: what was left behind follows the device."""
    def move(value):
        if isinstance(value, nn.Module):
            return value.to(device)  # in place for modules
        if value.device == device:
            return value
        moved = value.detach().to(device)
        if isinstance(value, nn.Parameter):
            return nn.Parameter(moved, requires_grad=value.requires_grad)
        return moved.requires_grad_(value.requires_grad) if value.is_floating_point() else moved
    return move


def as_leaf(value):
    """A trainable non-leaf (`nn.Parameter(t).double()`) as the leaf the optimizer would need:
    its graph is freed by the first backward and it cannot be deep-copied."""
    if isinstance(value, torch.Tensor) and value.requires_grad and not value.is_leaf:
        return value.detach().requires_grad_(True)
    return value


# -- TL903 / TL904: gradients over optimizer steps ------------------------------------------------

def _output_tensors(value, depth=0):
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4:
        if isinstance(value, dict):
            value = list(value.values())
        elif hasattr(value, "__dataclass_fields__"):
            value = [getattr(value, name, None) for name in value.__dataclass_fields__]
        if isinstance(value, (list, tuple)):
            for item in value:
                for tensor in _output_tensors(item, depth + 1):
                    yield tensor


def _has_empty_tensor(args, depth=0):
    for value in args:
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            return True
        if depth < 2 and isinstance(value, (list, tuple)) and _has_empty_tensor(value, depth + 1):
            return True
    return False


class CallRecord:
    __slots__ = ("calls", "empty", "with_grad")

    def __init__(self):
        self.calls = self.empty = self.with_grad = 0


class Watch:
    """Which submodules forward called (and how), and which parameters ops used under no_grad."""

    def __init__(self, modules, parameter_ids):
        self.records = {id(module): CallRecord() for module in modules.values()}
        self.parameter_ids = parameter_ids
        self.used_without_grad = set()
        self._hook = None
        self._mode = None

    def _pre_hook(self, module, args):
        record = self.records.get(id(module))
        if record is not None:
            record.calls += 1
            record.empty += _has_empty_tensor(args)
            record.with_grad += torch.is_grad_enabled()

    def __enter__(self):
        self._hook = nn.modules.module.register_module_forward_pre_hook(self._pre_hook)
        self._mode = _no_grad_recorder(self)
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
        self._hook.remove()
        return False

    def record(self, module):
        return self.records.get(id(module)) or CallRecord()


def _no_grad_recorder(watch):
    """A torch function mode noting parameters that ops use while grad is disabled (a frozen
    teacher, an EMA copy): getting no gradient is what they are meant for."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None

    class NoGradUses(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not torch.is_grad_enabled():
                for value in args:
                    if id(value) in watch.parameter_ids:
                        watch.used_without_grad.add(id(value))
                    elif isinstance(value, (list, tuple)):
                        watch.used_without_grad.update(id(v) for v in value if id(v) in watch.parameter_ids)
            return func(*args, **(kwargs or {}))

    return NoGradUses()


def _projected_loss(tensors, projections, device):
    """A fixed random projection of the outputs: unlike a sum, it is not constant after a
    LayerNorm or a softmax, and it gives every output element a gradient."""
    total = None
    for index, tensor in enumerate(tensors):
        value = tensor.real if tensor.is_complex() else tensor
        key = (index, tuple(value.shape))
        if key not in projections:
            generator = torch.Generator().manual_seed(1000 + index)
            projections[key] = torch.randn(tuple(value.shape), generator=generator).to(device)
        term = (value.float() * projections[key]).sum() / math.sqrt(max(value.numel(), 1))
        total = term if total is None else total + term
    return total


def _nonzero(grad):
    if grad is None:
        return False
    if grad.is_sparse:
        return grad._nnz() > 0 and bool(grad.coalesce().values().count_nonzero() > 0)
    return bool(grad.count_nonzero() > 0)


class GradientRun:
    """Forward + backward of a random projection, then an SGD step, two to four times, on a copy."""

    def __init__(self, model, state_of, inputs, run, device):
        self.original = model
        self.note = ""
        try:
            self.model = copy.deepcopy(model)
        except BaseException as exc:  # noqa: B902 - user objects may refuse to be copied
            self.model = model
            self.note = " (on the module itself: it cannot be deep-copied: %s)" % support.describe_exception(exc)
        self.state = state_of(self.model)
        self.inputs = inputs
        self.run = run
        self.device = device
        self.trainable = [(name, p) for name, p in self.state.parameters.items() if p.requires_grad]
        self.frozen = len(self.state.parameters) - len(self.trainable)
        self.watched = [held for held in self.state.held if held.tensor.requires_grad]
        self.steps = 0
        self.no_output = False

    def go(self):
        args, kwargs = self.inputs
        trainable_ids = {id(p) for _, p in self.trainable}
        self.got_grad, self.nonzero, self.outside = set(), set(), set()
        with torch.no_grad():
            before = {id(h.tensor): h.tensor.detach().clone() for h in self.watched}
        optimizer = torch.optim.SGD([p for _, p in self.trainable], lr=LEARNING_RATE) if self.trainable else None
        projections = {}
        self.watch = Watch(self.state.modules, trainable_ids)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # .grad of non-leaf tensors
            for held in self.watched:
                if held.tensor.is_leaf:
                    held.tensor.grad = None
                else:
                    held.tensor.retain_grad()
        for step in range(1, MAX_STEPS + 1):
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
            torch.manual_seed(step)  # dropout: the same masks on every run
            with torch.enable_grad(), self.watch:
                output = self.run("forward", self.model, *args, **kwargs)
            differentiable = [t for t in _output_tensors(output) if t.requires_grad and
                              (t.is_floating_point() or t.is_complex())]
            if not differentiable:
                self.no_output = step == 1
                break
            loss = _projected_loss(differentiable, projections, self.device)
            self.run("backward", loss.backward)
            self.steps = step
            new = 0
            for _, p in self.trainable:
                if p.grad is not None:
                    self.got_grad.add(id(p))
                    if id(p) not in self.nonzero and _nonzero(p.grad):
                        self.nonzero.add(id(p))
                        new += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.outside.update(id(h.tensor) for h in self.watched if h.tensor.grad is not None)
            if optimizer is not None:
                self.run("the optimizer step", optimizer.step)
            # Another step helps only parameters of modules forward ran with grad that a zero
            # gate still shields, and only while each step opens new ones.
            waiting = [name for name, p in self.trainable if id(p) not in self.nonzero
                       and any(r.with_grad for r in self._chain(_split(name)[0])[:1])]
            if step >= MIN_STEPS and (not waiting or not new):
                break
        with torch.no_grad():
            self.unchanged = [h for h in self.watched if torch.equal(before[id(h.tensor)], h.tensor.detach())]

    # -- what the run says ---------------------------------------------------------------------

    def tl903(self):
        state = self.state
        if self.no_output:
            issues = []
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
        self.unused, self.idle_experts = self._unused_modules()
        issues += state.issues(
            "TL903", [(_split(path), path, module) for path, module in self.unused], SEVERITY_INFO,
            lambda paths, details: "%s (%s) is never used in forward: its parameters get no gradient "
                                   "(DistributedDataParallel needs find_unused_parameters=True)" % (
                                       paths[0], type(details[0]).__name__))
        received = sum(1 for _, p in self.trainable if id(p) in self.nonzero)
        summary = "%d of %d trainable parameters received a gradient over %s%s; %s outside parameters() did" % (
            received, len(self.trainable), count(self.steps, "step"), self.note, count(len(outside), "tensor"))
        if self.unused:
            summary += "; %s never used in forward" % count(len(self.unused), "submodule")
        if self.frozen:
            summary += "; %d frozen (requires_grad=False)" % self.frozen
        return issues, summary

    def tl904(self):
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
        dead, idle, no_grad = [], {}, 0
        for name, p in self.trainable:
            if id(p) in self.nonzero or id(p) in silent:
                continue
            holder = _split(name)
            chain = self._chain(holder[0])
            if id(p) in experts or any(r.calls and r.empty == r.calls for r in chain):
                expert = experts.get(id(p)) or self._expert_path(holder[0])
                idle.setdefault(expert, []).append(name)
                continue
            if id(p) in self.watch.used_without_grad or (chain and chain[0].calls and not chain[0].with_grad):
                no_grad += 1
                continue
            dead.append((holder, name, id(p) in self.got_grad))
        issues += state.issues(
            "TL904", dead, SEVERITY_WARNING,
            lambda paths, details: "%s got %s in any of %s, so %s: %s" % (
                listing(paths), "only all-zero gradients" if all(details) else "no gradient",
                count(self.steps, "optimizer step"), "it never trains" if len(paths) == 1 else "they never train",
                "multiplied by zero, or behind a gate that stays zero?" if all(details) else
                "not used in forward, or cut from the graph by .detach() / .data?"))
        issues += state.issues(
            "TL904", [(_split(expert), expert, names) for expert, names in idle.items()], SEVERITY_INFO,
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

    def _chain(self, prefix):
        """Call records of the module at prefix and its ancestors, nearest first."""
        parts = prefix.split(".") if prefix else []
        chain = []
        while True:
            module = self.state.modules.get(".".join(parts))
            if module is not None:
                chain.append(self.watch.record(module))
            if not parts:
                return chain
            parts.pop()

    def _expert_path(self, prefix, default=None):
        """The outermost module of prefix's chain that ran on an empty batch only."""
        parts = prefix.split(".") if prefix else []
        found = prefix if default is None else default
        while parts:
            record = self.watch.record(self.state.modules.get(".".join(parts)))
            if record.calls and record.empty == record.calls:
                found = ".".join(parts)
            parts.pop()
        return found

    def _unused_modules(self):
        """(never used, idle experts): the outermost submodules with trainable parameters that
        forward never called (nor any module inside) and whose parameters got no gradient.
        An idle expert is one whose siblings in a ModuleList/ModuleDict were called."""
        modules = self.state.modules
        trainable = {id(p) for _, p in self.trainable}
        called = set()
        for prefix, module in modules.items():
            if self.watch.record(module).calls:
                parts = prefix.split(".") if prefix else []
                while True:
                    called.add(".".join(parts))  # a call inside counts for every module around it
                    if not parts:
                        break
                    parts.pop()
        unused, experts = [], []
        for prefix, module in modules.items():
            if not prefix or prefix in called:
                continue
            if any(prefix.startswith(path + ".") for path, _ in unused + experts):
                continue
            params = [p for p in module.parameters() if id(p) in trainable]
            if not params or any(id(p) in self.got_grad for p in params):
                continue
            parent_path, _ = _split(prefix)
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
