"""The child side of ``torchlint verify``: runs the user's nn.Module for real.

This is the only torchlint code that imports torch, and it does so only inside the
child process. It is run by path (``python probe.py REQUEST.json``) with the
workspace's interpreter, where torchlint itself may not be installed, so it uses
nothing but the standard library and torch.

The parent writes a request (JSON) naming the file, the class, the device, the
inputs and where to write the result. The result goes to that file, never to
stdout (the user's code may print anything there). It is rewritten after every
phase with ``finished: false``, so that when the user's code ends the process
(``os._exit``, ``os.abort``, a segfault) or hangs until the parent kills it, the
parent still knows how far verification got. Python-level tracebacks of hangs
and fatal signals go to ``stack_path`` through faulthandler.
"""
import faulthandler
import importlib.util
import inspect
import json
import os
import signal
import sys
import time
import traceback
import warnings

# Bound before any user code runs: user code may monkeypatch the modules.
_replace = os.replace
_dumps = json.dumps
_exit = os._exit

SEVERITY_ERROR, SEVERITY_WARNING, SEVERITY_INFO = "error", "warning", "info"
CHECK_NAMES = {
    "TL901": "registration",
    "TL902": "device move",
    "TL903": "gradients",
    "TL904": "optimizer step",
}
MAX_CONTAINER_ITEMS = 1000  # a list of a million floats is not a list of modules
MAX_DEPTH = 3


# -- the result file ---------------------------------------------------------------------------

class Result:
    def __init__(self, path):
        self.path = path
        self.data = {
            "finished": False,
            "phase": "start",
            "current_class": None,
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "torch_version": None,
            "device": None,
            "device_name": None,
            "device_note": "",
            "error": None,  # {"kind", "message"}: verification could not run at all
            "file_issues": [],  # TL905 for the import
            "classes": [],
        }

    def phase(self, phase, class_name=None):
        self.data["phase"] = phase
        self.data["current_class"] = class_name
        self.save()

    def save(self):
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(_dumps(self.data, default=str))
        _replace(temporary, self.path)


# -- describing user errors ----------------------------------------------------------------------

class UserError(Exception):
    """A failure of the user's code, already described as a TL905 issue."""

    def __init__(self, issue, stage, error):
        Exception.__init__(self, issue["message"])
        self.issue = issue
        self.stage = stage  # what was being done: "Net.forward", "constructing Net()"...
        self.error = error  # the exception, in words


def _same_file(a, b):
    try:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
    except (OSError, ValueError, TypeError):
        return False


def describe_exception(exc):
    if isinstance(exc, SystemExit):
        return "the module's code called sys.exit(%r)" % (exc.code,)
    text = str(exc).strip()
    if len(text) > 600:
        text = text[:600] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def user_line(exc, user_path):
    """(line, function) of the innermost frame of the traceback in the user's file."""
    if isinstance(exc, SyntaxError) and exc.filename and _same_file(exc.filename, user_path):
        return exc.lineno, None
    found = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if _same_file(frame.filename, user_path):
            found = (frame.lineno, frame.name)
    return found


def failure_issue(exc, doing, class_name, user_path):
    line, function = user_line(exc, user_path)
    where = " (line %d%s)" % (line, ", in %s" % function if function and function != "<module>" else "") if line else ""
    # The traceback from the user's side: not the probe's frames, nor importlib's.
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and (
            _same_file(tb.tb_frame.f_code.co_filename, __file__)
            or tb.tb_frame.f_code.co_filename.startswith("<frozen importlib")):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return {
        "code": "TL905",
        "class_name": class_name,
        "attribute": None,
        "paths": [],
        "line": line,
        "severity": SEVERITY_ERROR,
        "message": "%s failed%s: %s" % (doing, where, describe_exception(exc)),
        "detail": "".join(lines[-12:]).rstrip(),
    }


def run_user(doing, class_name, user_path, function, *args, **kwargs):
    """Call user code; anything it raises (SystemExit, KeyboardInterrupt too) becomes a UserError."""
    try:
        return function(*args, **kwargs)
    except BaseException as exc:  # noqa: B902 - hostile code may raise anything
        raise UserError(failure_issue(exc, doing, class_name, user_path), doing, describe_exception(exc))


# -- what a module holds ------------------------------------------------------------------------

def describe_tensor(tensor):
    import torch

    kind = "an nn.Parameter" if isinstance(tensor, torch.nn.Parameter) else "a tensor"
    dtype = str(tensor.dtype).replace("torch.", "")
    grad = ", requires_grad" if tensor.requires_grad else ""
    return "%s (%s, shape %s%s, on %s)" % (kind, dtype, list(tensor.shape), grad, tensor.device)


def _contents(value, path, depth=0):
    """(path, item) for the tensors and modules inside a list/tuple/set/dict, recursively."""
    import torch

    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        yield path, value
        return
    if depth >= MAX_DEPTH:
        return
    if isinstance(value, dict):
        items = [("%s[%r]" % (path, key), item) for key, item in list(value.items())[:MAX_CONTAINER_ITEMS]]
    elif isinstance(value, (list, tuple)):
        items = [("%s[%d]" % (path, i), item) for i, item in enumerate(value[:MAX_CONTAINER_ITEMS])]
    elif isinstance(value, (set, frozenset)):
        items = [("%s[?]" % path, item) for item in list(value)[:MAX_CONTAINER_ITEMS]]
    else:
        return
    for item_path, item in items:
        for found in _contents(item, item_path, depth + 1):
            yield found


class Held:
    """A tensor the module tree holds outside its registered parameters and buffers."""

    def __init__(self, path, tensor, owner):
        self.path = path  # as seen from the verified module: "blocks.0.gamma_1", "layers[0].weight"
        self.tensor = tensor
        self.owner = owner  # (class name, attribute) of the `self.<attribute> = ...` that stored it


class State:
    """Everything the module tree holds, registered or not, collected in one walk."""

    def __init__(self, model, user_module, baseline):
        import torch

        self.modules = dict(model.named_modules())
        self.module_ids = {id(m) for m in self.modules.values()}
        self.parameters = dict(model.named_parameters())
        self.buffers = dict(model.named_buffers())
        self.registered_ids = {id(t) for t in self.parameters.values()} | {id(t) for t in self.buffers.values()}
        self.user_module = user_module
        self.unregistered = []  # (owner, path, description, trainable) for TL901
        self.held = []  # every unregistered tensor reachable, as Held
        seen = set()

        def hold(path, tensor, owner):
            if id(tensor) not in seen and id(tensor) not in self.registered_ids:
                seen.add(id(tensor))
                self.held.append(Held(path, tensor, owner))

        for prefix, module in self.modules.items():
            for name, value in list(vars(module).items()):
                if name in baseline:
                    continue
                path = prefix + "." + name if prefix else name
                owner = self.owner_of(prefix, name)
                if isinstance(value, torch.Tensor):
                    hold(path, value, owner)
                    self.unregistered.append((owner, path, describe_tensor(value), value.requires_grad, False))
                    continue
                found = list(_contents(value, path))
                if not found:
                    continue
                lost = []  # modules, parameters and trainable tensors nobody registered
                for item_path, item in found:
                    if isinstance(item, torch.nn.Module):
                        if id(item) in self.module_ids:
                            continue  # an alias of a registered submodule: nothing is lost
                        lost.append(item)
                        for sub_name, tensor in list(item.named_parameters()) + list(item.named_buffers()):
                            hold(item_path + "." + sub_name, tensor, owner)
                    else:
                        if id(item) not in self.registered_ids and (
                                isinstance(item, torch.nn.Parameter) or item.requires_grad):
                            lost.append(item)
                        hold(item_path, item, owner)
                if lost:
                    self.unregistered.append((owner, path, describe_container(value, lost), True, True))

    def owner_of(self, prefix, attribute):
        """The class of this file whose `self.<attr> = ...` stored what sits at prefix.attribute."""
        parts = prefix.split(".") if prefix else []
        while True:
            module = self.modules.get(".".join(parts))
            if module is not None and type(module).__module__ == self.user_module:
                return type(module).__name__, attribute
            if not parts:
                return type(self.modules[""]).__name__, None
            attribute = parts.pop()


def describe_container(value, lost):
    import torch

    if isinstance(value, torch.nn.Module):
        return "the module %s, stored around nn.Module.__setattr__" % type(value).__name__
    modules = sum(1 for item in lost if isinstance(item, torch.nn.Module))
    tensors = [item for item in lost if not isinstance(item, torch.nn.Module)]
    what = []
    if modules:
        what.append(_count(modules, "module"))
    if tensors:
        all_parameters = all(isinstance(t, torch.nn.Parameter) for t in tensors)
        what.append(_count(len(tensors), "parameter" if all_parameters else "trainable tensor"))
    return "a plain %s holding %s" % (type(value).__name__, " and ".join(what))


def group_issues(code, entries, severity, message):
    """One issue per (class, attribute): 12 blocks with the same bug are one finding.

    ``entries``: (owner, path, detail); ``message(paths, details)`` words it."""
    groups = {}
    for owner, path, detail in entries:
        groups.setdefault(owner, []).append((path, detail))
    issues = []
    for (class_name, attribute), members in groups.items():
        paths = [path for path, _ in members]
        issues.append({
            "code": code,
            "class_name": class_name,
            "attribute": attribute,
            "paths": paths,
            "line": None,
            "severity": severity(members) if callable(severity) else severity,
            "message": message(paths, [detail for _, detail in members]),
            "detail": "",
        })
    return issues


def _count(number, noun):
    return "%d %s%s" % (number, noun, "" if number == 1 else "s")


def _list(paths, limit=4):
    shown = ", ".join(paths[:limit])
    return shown + (" and %d more" % (len(paths) - limit) if len(paths) > limit else "")


# -- the checks ----------------------------------------------------------------------------------

def check_registration(state):
    entries = [(owner, path, (description, trainable, container))
               for owner, path, description, trainable, container in state.unregistered]

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
            consequence = "not in state_dict(), and .to()/.cuda() do not move it (register_buffer would)"
        where = paths[0] if len(paths) == 1 else "%s (in %d modules)" % (_list(paths, 2), len(paths))
        return "%s is %s, a plain attribute, not registered: %s" % (where, description, consequence)

    return group_issues("TL901", entries,
                        lambda members: SEVERITY_ERROR if any(d[1] for _, d in members) else SEVERITY_WARNING,
                        message)


def tensors_to_move(state):
    """Every tensor of the tree: registered ones must follow a move, and the others show that they do not."""
    items = [(state.owner_of(*_split(path)), path, tensor) for path, tensor in state.parameters.items()]
    items += [(state.owner_of(*_split(path)), path, tensor) for path, tensor in state.buffers.items()]
    items += [(held.owner, held.path, held.tensor) for held in state.held]
    return items


def _split(path):
    prefix, _, name = path.rpartition(".")
    return prefix, name


def check_device(state, device, dtype_standin):
    """TL902 after model.to(device) (CUDA) or model.to(torch.float64) (the CPU stand-in)."""
    import torch

    left = []
    for owner, path, tensor in tensors_to_move(state):
        if dtype_standin:
            if tensor.is_floating_point() and tensor.dtype != torch.float64:
                left.append((owner, path, "still %s" % str(tensor.dtype).replace("torch.", "")))
        elif tensor.device != device:
            left.append((owner, path, "still on %s" % tensor.device))

    def message(paths, details):
        verb = "was" if len(paths) == 1 else "were"
        if dtype_standin:
            return ("%s %s not converted by model.to(torch.float64) (%s), so model.to(device) leaves %s behind "
                    "too (CPU run: the dtype move stands in for the device move)" % (
                        _list(paths), verb, details[0], "it" if len(paths) == 1 else "them"))
        return "%s %s left behind by model.to(%s): %s" % (_list(paths), verb, device, details[0])

    return group_issues("TL902", left, SEVERITY_ERROR, message)


def _output_tensors(value, depth=0):
    import torch

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


def check_gradients(model, state, inputs, run):
    """TL903: forward + backward; which tensors got gradients, and whether the optimizer can see them."""
    import torch

    args, kwargs = inputs
    model.zero_grad(set_to_none=True)
    watched = [held for held in state.held if held.tensor.requires_grad]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for held in watched:
            if held.tensor.is_leaf:
                held.tensor.grad = None
            else:
                held.tensor.retain_grad()  # `nn.Parameter(t).double()`: the gradient stops here otherwise
    with torch.enable_grad():
        output = run("forward", model, *args, **kwargs)
        differentiable = [t for t in _output_tensors(output) if t.requires_grad and
                          (t.is_floating_point() or t.is_complex())]
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not differentiable:
            issues = []
            if trainable:
                issues.append({"code": "TL903", "class_name": type(model).__name__, "attribute": None, "paths": [],
                               "line": None, "severity": SEVERITY_WARNING, "detail": "",
                               "message": "the output of forward() does not depend on any trainable tensor "
                                          "(computed under no_grad or detached?): nothing can be trained"})
            return issues, "forward ran; the output does not require grad, so there was nothing to back-propagate"
        loss = sum(t.real.float().sum() if t.is_complex() else t.float().sum() for t in differentiable)
        run("backward", loss.backward)

    outside = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for held in watched:
            if held.tensor.grad is not None:
                outside.append((held.owner, held.path, describe_tensor(held.tensor)))
    unused = [(state.owner_of(*_split(name)), name, "")
              for name, p in state.parameters.items() if p.requires_grad and p.grad is None]

    issues = group_issues(
        "TL903", outside, SEVERITY_ERROR,
        lambda paths, details: "%s received a gradient in backward() but %s not in parameters(): "
                               "an optimizer built from model.parameters() never updates %s" % (
                                   _list(paths), "is" if len(paths) == 1 else "are",
                                   "it" if len(paths) == 1 else "them"))
    issues += group_issues(
        "TL903", unused, SEVERITY_WARNING,
        lambda paths, details: "parameter%s %s got no gradient from forward + backward with these inputs "
                               "(unused, or cut from the graph by .detach()/.data/no_grad)" % (
                                   "" if len(paths) == 1 else "s", _list(paths)))
    received = sum(1 for p in trainable if p.grad is not None)
    summary = "%d of %d trainable parameters received a gradient; %s outside parameters() did" % (
        received, len(trainable), _count(len(outside), "tensor"))
    return issues, summary


def check_step(model, state, run):
    """TL904: one SGD step over parameters(); which trainable tensors changed."""
    import torch

    parameters = [(name, p) for name, p in state.parameters.items() if p.requires_grad]
    outside = [held for held in state.held if held.tensor.requires_grad]
    with torch.no_grad():
        before = {id(t): t.detach().clone() for t in [p for _, p in parameters] + [h.tensor for h in outside]}
    if parameters:  # SGD refuses an empty list; with nothing registered, nothing can change
        optimizer = torch.optim.SGD([p for _, p in parameters], lr=0.1)
        run("the optimizer step", optimizer.step)
    with torch.no_grad():
        unchanged = [(held.owner, held.path, describe_tensor(held.tensor)) for held in outside
                     if torch.equal(before[id(held.tensor)], held.tensor.detach())]
        zero_grad = [(state.owner_of(*_split(name)), name, "") for name, p in parameters
                     if p.grad is not None and torch.equal(before[id(p)], p.detach())]
        changed = sum(1 for _, p in parameters if not torch.equal(before[id(p)], p.detach()))
    issues = group_issues(
        "TL904", unchanged, SEVERITY_ERROR,
        lambda paths, details: "%s did not change after an optimizer step over model.parameters(): "
                               "%s trainable but not in parameters()" % (
                                   _list(paths), "it is" if len(paths) == 1 else "they are"))
    issues += group_issues(
        "TL904", zero_grad, SEVERITY_WARNING,
        lambda paths, details: "%s did not change after an optimizer step: %s gradient was all zeros" % (
            _list(paths), "its" if len(paths) == 1 else "their"))
    summary = "%d of %d trainable parameters changed; %s outside parameters() did not" % (
        changed, len(parameters), _count(len(unchanged), "trainable tensor"))
    return issues, summary


# -- example inputs -------------------------------------------------------------------------------

FACTORY_NAMES = ("torchlint_example_inputs", "example_inputs")


def _as_call_arguments(value):
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (list, tuple)):
        return tuple(value), {}
    return (value,), {}


def _to_device(value, device, depth=0):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if depth < 4 and type(value) in (list, tuple):  # not namedtuples: their constructors differ
        return type(value)(_to_device(v, device, depth + 1) for v in value)
    if depth < 4 and type(value) is dict:
        return {k: _to_device(v, device, depth + 1) for k, v in value.items()}
    return value


def _describe_arguments(args, kwargs):
    import torch

    def one(value):
        if isinstance(value, torch.Tensor):
            return "%s %s" % (tuple(value.shape), str(value.dtype).replace("torch.", ""))
        return type(value).__name__

    parts = [one(a) for a in args] + ["%s=%s" % (k, one(v)) for k, v in kwargs.items()]
    return ", ".join(parts) or "no arguments"


def _accepts_argument(function):
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def derive_inputs(model):
    """Inputs that fit the first layer that tells its input size, or (None, None)."""
    import torch
    from torch import nn

    spatial = {nn.Conv1d: (32,), nn.Conv2d: (32, 32), nn.Conv3d: (8, 8, 8)}
    for name, layer in model.named_modules():
        if layer is model:
            continue
        if any(isinstance(p, nn.parameter.UninitializedParameter) for p in layer.parameters(recurse=False)):
            return None, None  # lazy layers: their sizes are not known yet
        label = "%s = %s" % (name, type(layer).__name__)
        if isinstance(layer, nn.Linear):
            return (torch.randn(2, layer.in_features),), "%s(in_features=%d)" % (label, layer.in_features)
        for conv, size in spatial.items():
            if type(layer) is conv:
                channels = layer.in_channels
                return (torch.randn(2, channels, *size),), "%s(in_channels=%d)" % (label, channels)
        if isinstance(layer, nn.Embedding):
            return ((torch.randint(0, layer.num_embeddings, (2, 8)),),
                    "%s(num_embeddings=%d)" % (label, layer.num_embeddings))
        if isinstance(layer, nn.LayerNorm):
            shape = tuple(layer.normalized_shape)
            return (torch.randn(2, *shape),), "%s(%s)" % (label, list(shape))
    return None, None


def find_inputs(model, user_module, request, several_classes, run):
    """(args, kwargs, description, trusted) or None with the reason in description.

    ``trusted``: the inputs were meant for this module, so a forward failure is the
    module's bug (TL905); guessed inputs that do not fit only skip the gradient checks."""
    import torch

    class_name = type(model).__name__
    shapes = request.get("input_shapes")
    if shapes:
        args = tuple(torch.randint(0, 2, tuple(s["shape"])) if s["dtype"] == "int64"
                     else torch.randn(*s["shape"], dtype=getattr(torch, s["dtype"])) for s in shapes)
        return args, {}, "%s (from --input-shape)" % _describe_arguments(args, {}), True
    factory = getattr(type(model), "torchlint_example_inputs", None)
    if callable(factory):
        value = run("%s.torchlint_example_inputs()" % class_name, getattr(model, "torchlint_example_inputs"))
        args, kwargs = _as_call_arguments(value)
        return args, kwargs, "%s (from %s.torchlint_example_inputs)" % (
            _describe_arguments(args, kwargs), class_name), True
    lightning = getattr(model, "example_input_array", None)
    if isinstance(lightning, (torch.Tensor, tuple, list, dict)):
        args, kwargs = _as_call_arguments(lightning)
        return args, kwargs, "%s (from example_input_array)" % _describe_arguments(args, kwargs), True
    for name in FACTORY_NAMES:
        factory = getattr(user_module, name, None)
        if callable(factory) and not inspect.isclass(factory):
            takes_module = _accepts_argument(factory)
            value = run("%s()" % name, factory, model) if takes_module else run("%s()" % name, factory)
            if value is None:
                return None, None, "%s() returned None for %s" % (name, class_name), False
            args, kwargs = _as_call_arguments(value)
            # A factory without a parameter cannot know which class it serves.
            trusted = takes_module or not several_classes
            return args, kwargs, "%s (from %s())" % (_describe_arguments(args, kwargs), name), trusted
    args, source = derive_inputs(model)
    if args is not None:
        return args, {}, "%s (guessed from %s)" % (_describe_arguments(args, {}), source), False
    return None, None, "no example inputs", False


HOW_TO_GIVE_INPUTS = ("give --input-shape (e.g. 2,16), or define torchlint_example_inputs() on the class "
                      "or example_inputs(module) in the file")


# -- verifying one class --------------------------------------------------------------------------

def check_entry(code, status, summary):
    return {"code": code, "name": CHECK_NAMES[code], "status": status, "summary": summary}


def construct(cls, init_kwargs, user_path):
    """(instance, None) or (None, reason it was skipped); construction failures raise UserError."""
    import torch

    kwargs = init_kwargs or {}
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as err:
        if init_kwargs:
            return None, "the --init-kwargs do not fit %s%s: %s" % (cls.__name__, _signature(cls), err)
        example = ", ".join('"%s": ...' % name for name in _required(cls))
        return None, "needs arguments %s; give them with --init-kwargs '{%s}'" % (_signature(cls), example)
    except ValueError:
        pass  # no signature to read (a C-level __init__): just try
    torch.manual_seed(0)
    return run_user("constructing %s(%s)" % (cls.__name__, _kwargs_text(kwargs)), cls.__name__, user_path,
                    cls, **kwargs), None


def _signature(cls):
    try:
        return str(inspect.signature(cls))
    except (TypeError, ValueError):
        return "(...)"


def _required(cls):
    try:
        return [p.name for p in inspect.signature(cls).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    except (TypeError, ValueError):
        return []


def _kwargs_text(kwargs):
    text = ", ".join("%s=%r" % item for item in kwargs.items())
    return text if len(text) < 80 else text[:77] + "..."


def verify_class(cls, request, user_module, result, report, baseline, device, several_classes):
    import torch

    name = cls.__name__
    user_path = request["path"]
    checks, issues = report["checks"], report["issues"]

    forward = "%s.forward" % name

    def run(doing, function, *args, **kwargs):
        return run_user(forward if doing == "forward" else doing, name, user_path, function, *args, **kwargs)

    result.phase("construct", name)
    model, reason = construct(cls, request.get("init_kwargs"), user_path)
    if model is None:
        report["status"], report["skip_reason"] = "skipped", reason
        return
    if not isinstance(model, torch.nn.Module):
        report["status"], report["skip_reason"] = "skipped", "%s() did not return an nn.Module" % name
        return

    result.phase("registration", name)
    state = State(model, user_module.__name__, baseline)
    found = check_registration(state)
    issues += found
    checks.append(check_entry("TL901", "failed" if found else "passed",
                              _count(len(found), "unregistered attribute") if found
                              else "every tensor, module and parameter is registered"))

    dtype_standin = device.type == "cpu"
    if not dtype_standin:
        result.phase("move", name)
        run("moving %s to %s" % (name, device), model.to, device)
        state = State(model, user_module.__name__, baseline)
        moved = check_device(state, device, False)
        issues += moved
        checks.append(check_entry("TL902", "failed" if moved else "passed",
                                  "after model.to(%s)" % device))

    result.phase("inputs", name)
    args, kwargs, description, trusted = find_inputs(model, user_module, request, several_classes, run)
    report["inputs"] = description
    if args is None:
        reason = "%s: %s" % (description, HOW_TO_GIVE_INPUTS)
        checks.append(check_entry("TL903", "skipped", reason))
        checks.append(check_entry("TL904", "skipped", reason))
    else:
        args, kwargs = _to_device(args, device), _to_device(kwargs, device)
        result.phase("forward", name)
        try:
            grad_issues, summary = check_gradients(model, state, (args, kwargs), run)
        except UserError as failure:
            # A device mismatch is the module's state left behind (TL902 showing itself), whatever the inputs.
            if trusted or failure.stage != forward or "same device" in failure.error:
                raise
            # Guessed inputs that do not fit say nothing about the module.
            reason = "the inputs %s did not fit (%s); %s" % (description, failure.error, HOW_TO_GIVE_INPUTS)
            report["inputs"] = None
            checks.append(check_entry("TL903", "skipped", reason))
            checks.append(check_entry("TL904", "skipped", reason))
        else:
            issues += grad_issues
            checks.append(check_entry("TL903", "failed" if grad_issues else "passed", summary))
            result.phase("step", name)
            step_issues, summary = check_step(model, state, run)
            issues += step_issues
            checks.append(check_entry("TL904", "failed" if step_issues else "passed", summary))

    if dtype_standin:
        result.phase("move", name)
        run("moving %s with .to(torch.float64)" % name, model.to, torch.float64)
        state = State(model, user_module.__name__, baseline)
        moved = check_device(state, device, True)
        issues += moved
        checks.append(check_entry("TL902", "failed" if moved else "passed",
                                  "CPU run: model.to(torch.float64) stood in for model.to(device)"))


# -- the whole run --------------------------------------------------------------------------------

def pick_device(torch, requested):
    """(torch.device, name, note) or raises RuntimeError with a message for the user."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        return pick_cuda(torch, requested)
    return (torch.device("cpu"), None,
            "CPU run: TL902 moves the module with .to(torch.float64) as the observable stand-in for .to(device)")


def pick_cuda(torch, requested):
    if not torch.cuda.is_available():
        raise RuntimeError("--device %s was asked for, but torch.cuda.is_available() is False here (torch %s%s)" % (
            requested, torch.__version__, ", built without CUDA" if torch.version.cuda is None else ""))
    device = torch.device(requested)
    index = device.index if device.index is not None else torch.cuda.current_device()
    device = torch.device("cuda", index)
    return device, torch.cuda.get_device_name(index), ""


def module_classes(user_module, torch):
    """The nn.Module subclasses defined in the file, in the order they are defined."""
    return [value for value in list(vars(user_module).values())
            if inspect.isclass(value) and issubclass(value, torch.nn.Module)
            and value.__module__ == user_module.__name__]


def load_user_module(path):
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


def main(request_path):
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    result = Result(request["result_path"])
    result.save()
    stack_file = open(request["stack_path"], "w")
    faulthandler.enable(file=stack_file, all_threads=True)  # os.abort, segfaults: where it was
    # A hang: the parent sends SIGUSR1 just before the kill, and faulthandler writes where it
    # is stuck. Where there are no such signals (Windows), a timer does it shortly before the deadline.
    if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    else:
        remaining = request["deadline"] - time.time()
        margin = min(1.0, max(0.25, 0.1 * remaining))
        if remaining > margin:
            faulthandler.dump_traceback_later(remaining - margin, file=stack_file)

    result.phase("torch")
    try:
        import torch
    except ImportError as err:
        result.data["error"] = {"kind": "no_torch", "message": "torch cannot be imported by %s (%s)" % (
            sys.executable, err)}
        return result
    result.data["torch_version"] = torch.__version__
    try:
        device, device_name, note = pick_device(torch, request["device"])
    except RuntimeError as err:
        result.data["error"] = {"kind": "no_cuda", "message": str(err)}
        return result
    result.data.update(device=str(device), device_name=device_name, device_note=note)

    path = request["path"]
    result.phase("import")
    try:
        user_module = run_user("importing %s" % os.path.basename(path), None, path, load_user_module, path)
    except UserError as failure:
        result.data["file_issues"].append(failure.issue)
        return result

    class_name = request.get("class_name")
    if class_name:
        cls = getattr(user_module, class_name, None)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
            what = "no class %r" % class_name if cls is None else "%r is not an nn.Module subclass" % class_name
            result.data["error"] = {"kind": "no_class", "message": "%s in %s" % (what, path)}
            return result
        classes = [cls]
    else:
        classes = module_classes(user_module, torch)
    baseline = set(vars(torch.nn.Module()))
    for cls in classes:
        report = {"name": cls.__name__, "status": "verified", "skip_reason": None, "inputs": None,
                  "checks": [], "issues": []}
        result.data["classes"].append(report)
        try:
            verify_class(cls, request, user_module, result, report, baseline, device, len(classes) > 1)
        except UserError as failure:
            report["status"] = "failed"
            report["issues"].append(failure.issue)
        except Exception as exc:  # a torchlint bug, or torch refusing something: say so, go on
            report["status"] = "failed"
            report["issues"].append(failure_issue(exc, "verifying %s" % cls.__name__, cls.__name__, path))
        report["checks"].sort(key=lambda check: check["code"])
    return result


def run_probe(request_path):
    result = main(request_path)
    result.data["finished"] = True
    result.data["phase"] = "done"
    result.data["current_class"] = None
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
        traceback.print_exc()
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
