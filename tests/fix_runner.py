"""Runs Python files of PyTorch code, before and after torchlint's fixes, and says what each run did.

Not a test module: tests/test_fixes_runtime.py starts it in a subprocess (torch is imported once
for every file, and a file that hangs cannot hang the test run) and feeds it a JSON list of jobs
on stdin, one per file:

    {"name": "tl102_layer_lists", "texts": {"original": "...", "fix": "...", "unsafe-fix": "..."},
     "inputs": {"ClassName": "torch.randn(2, 8)"}}

and reads one JSON object per job on stdout: for each text, its stages and what each gave:

    "import"            "ok", or the exception's type name (the classes defined before it still run)
    "import.message"    that exception's type and message
    "<Class>.build"     the class built with no arguments: "ok" or the exception
    "<Class>.forward"   one forward: the output's signature (per tensor: shape, dtype, device), or
                        the exception
    "<Class>.step"      backward and one SGD step, when the output needs a gradient
    "__main__"          the file run as a script: "ok" or the exception, when it has such a block
    "__main__.calls"    the signatures of the outermost module calls the script made

The input of a forward is, in this order: the file's own `example_inputs(module)` (the factory
`torchlint verify` reads), the job's "inputs" for that class, or a batch sized for the first layer
found in any of the texts' builds of that class (a Linear, a Conv, an Embedding); the same input
for every text. Without a GPU (the tests hide it unless TORCHLINT_HARNESS_GPU=1), `.cuda()`,
`torch.cuda.FloatTensor` and `"cuda"` are read as their CPU twins, so that what is compared is
what the fixes did to the code, the same on any machine.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import re
import signal
import sys
import warnings

import torch

# One thread: on a loaded 2-core CI machine torch's own thread pool fighting the other tests for
# the cores made a 500-step tutorial loop run past the limit; the runs compare behaviour, not speed.
torch.set_num_threads(1)
PER_TEXT_SECONDS = 60
# A job may name the package its file belongs to ("package": "timm.models"): its relative imports
# then resolve against that package as installed on the import path (benchmarks/real_code_signal.py runs
# files of real code bases this way; the fixtures have none).
_PACKAGE = [None]

_CUDA_CALL = re.compile(r"\.cuda\([^()]*\)")
_CUDA_TYPE = re.compile(r"\bcuda\.(\w+Tensor)\b")
_CUDA_NAME = re.compile(r"""(["'])cuda(:\d+)?\1""")


def on_the_cpu(text: str) -> str:
    """`.cuda()` -> `.cpu()`, `torch.cuda.FloatTensor` -> `torch.FloatTensor`, `"cuda:0"` -> `"cpu"`."""
    return _CUDA_NAME.sub(r"\1cpu\1", _CUDA_TYPE.sub(r"\1", _CUDA_CALL.sub(".cpu()", text)))


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def signature(value, depth=0):
    """What a forward returned, as far as a fix must keep it: shapes, dtypes and devices."""
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), str(value.dtype), value.device.type]
    if depth > 3:
        return type(value).__name__
    if isinstance(value, (tuple, list)):
        return [type(value).__name__] + [signature(v, depth + 1) for v in value[:16]]
    if isinstance(value, dict):
        return ["dict"] + [[str(k), signature(v, depth + 1)] for k, v in sorted(value.items(), key=str)[:16]]
    return type(value).__name__


def first_layer_input(model):
    """A batch for the first layer that says its size (what `torchlint verify` derives too)."""
    for layer in model.modules():
        if isinstance(layer, torch.nn.Linear):
            return "torch.randn(2, %d)" % layer.in_features
        if isinstance(layer, torch.nn.Conv2d):
            return "torch.randn(2, %d, 16, 16)" % layer.in_channels
        if isinstance(layer, torch.nn.Conv1d):
            return "torch.randn(2, %d, 16)" % layer.in_channels
        if isinstance(layer, torch.nn.Embedding):
            return "torch.randint(0, %d, (2, 5))" % layer.num_embeddings
    return None


def _module_classes(namespace, name):
    for cls_name, cls in sorted(namespace.items()):
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == name:
            required = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if not required:
                yield cls_name, cls


def _load(text, name):
    """(namespace, how the import went): the classes defined before an exception are kept."""
    namespace = {"__name__": name}
    if _PACKAGE[0]:
        namespace["__package__"] = _PACKAGE[0]
    torch.manual_seed(0)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(text, name + ".py", "exec"), namespace)
        return namespace, "ok"
    except Timeout:
        raise
    except BaseException as err:  # the buggy original may raise: that is what the fixes are for
        namespace["__error__"] = "%s: %s" % (type(err).__name__, str(err)[:300])
        return namespace, type(err).__name__


def _device_of(model):
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device
    return torch.device("cpu")


def builds(text, name):
    """{class name: model} for the classes of a text that build with no arguments (for inputs)."""
    namespace, _ = _load(text, name)
    made = {}
    for cls_name, cls in _module_classes(namespace, name):
        try:
            torch.manual_seed(0)
            made[cls_name] = cls()
        except Timeout:
            raise
        except BaseException:
            pass
    return made


def stages(text, name, inputs):
    done = {}
    namespace, done["import"] = _load(text, name)
    if "__error__" in namespace:
        done["import.message"] = namespace["__error__"]
    factory = namespace.get("example_inputs")
    for cls_name, cls in _module_classes(namespace, name):
        try:
            torch.manual_seed(0)
            model = cls()
        except Timeout:
            raise
        except BaseException as err:
            done[cls_name + ".build"] = type(err).__name__
            continue
        done[cls_name + ".build"] = "ok"
        forward = getattr(cls, "forward", None)
        if forward is torch.nn.Module.forward:
            continue  # no forward of its own (a helper module)
        try:
            if callable(factory):
                args = tuple(factory(model))
            elif inputs.get(cls_name):
                torch.manual_seed(1)
                made = eval(inputs[cls_name], {"torch": torch})
                args = made if isinstance(made, tuple) else (made,)
            else:
                continue
            device = _device_of(model)
            args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
            torch.manual_seed(2)
            out = model(*args)
        except Timeout:
            raise
        except BaseException as err:
            done[cls_name + ".forward"] = type(err).__name__
            continue
        done[cls_name + ".forward"] = signature(out)
        first = out[0] if isinstance(out, (tuple, list)) and out else out
        trainable = [p for p in model.parameters() if p.requires_grad]
        if isinstance(first, torch.Tensor) and first.requires_grad and trainable:
            try:
                optimizer = torch.optim.SGD(trainable, lr=0.01)
                first.float().pow(2).mean().backward()
                optimizer.step()
                done[cls_name + ".step"] = "ok"
            except Timeout:
                raise
            except BaseException as err:
                done[cls_name + ".step"] = type(err).__name__
    if re.search(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", text, re.M):
        done.update(as_script(text, name))
    return done


def as_script(text, name):
    """The file run as `__main__`, with the outermost module calls it makes."""
    calls, depth = [], [0]

    def before(module, args):
        depth[0] += 1

    def after(module, args, output):
        depth[0] -= 1
        if depth[0] == 0:
            calls.append([type(module).__name__, signature(output)])

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(before),
             torch.nn.modules.module.register_module_forward_hook(after)]
    try:
        _, how = _load(text, "__main__")
    finally:
        for hook in hooks:
            hook.remove()
    return {"__main__": how, "__main__.calls": calls}


def run_job(job, gpu):
    texts = {kind: text if gpu else on_the_cpu(text) for kind, text in job["texts"].items()}
    name = "fixture_" + job["name"]
    inputs = dict(job.get("inputs") or {})
    _PACKAGE[0] = job.get("package")
    report = {}
    signal.alarm(PER_TEXT_SECONDS)
    try:
        # One input per class for every text, sized from whichever build shows a first layer (a
        # layer kept in a plain list shows only once the fix registers it).
        for text in texts.values():
            for cls_name, model in builds(text, name).items():
                if cls_name not in inputs:
                    inputs[cls_name] = first_layer_input(model)
    except Timeout:
        pass
    finally:
        signal.alarm(0)
    done_texts = {}
    for kind, text in texts.items():
        if text in done_texts:
            report[kind] = report[done_texts[text]]
            continue
        done_texts[text] = kind
        signal.alarm(PER_TEXT_SECONDS)
        try:
            report[kind] = stages(text, name, inputs)
        except Timeout:
            report[kind] = {"timeout": "Timeout"}
        finally:
            signal.alarm(0)
    return report


def main():
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    jobs = json.load(sys.stdin)
    gpu = torch.cuda.is_available()
    out = sys.stdout
    sys.stdout = io.StringIO()  # what the files print is not the report
    results = {job["name"]: run_job(job, gpu) for job in jobs}
    json.dump({"gpu": gpu, "results": results}, out)


if __name__ == "__main__":
    main()
