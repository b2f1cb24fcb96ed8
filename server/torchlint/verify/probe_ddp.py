"""The child side of ``torchlint verify --ddp`` (TL908): two training steps of the built module
under ``DistributedDataParallel``, in a 2-process ``gloo`` group on the CPU.

Loaded by ``probe.py`` by path, in the probe only, and only when --ddp is asked for (it imports
torch.distributed). The probe forks two ranks (``os.fork``: each starts from the module as built
and from the same inputs, so nothing has to be built, imported or pickled again); they meet
through a file store in the probe's private folder and talk over the loopback interface, so no
port is chosen and no network is needed. Each wraps the module with ``find_unused_parameters=False``
(the default), builds SGD over ``ddp.parameters()``, and runs two steps; the loss is a random
projection of the outputs seeded by the rank, so every gradient differs between the ranks
unless DDP averaged it. After each backward a rank writes the gradient of every parameter and of
every plain leaf tensor that requires grad, and which of DDP's parameters got none; the probe
compares the two ranks' files. Nothing here waits without a bound: the group has a timeout, the
probe kills a rank still running at its deadline (or some seconds after the other rank ended),
and a rank whose probe is gone ends itself.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Set, Tuple

import torch
from torch import nn

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 runs this file as it is
    from typing import Callable, Optional

    from . import probe_checks as checks, probe_support as support  # as mypy reads what probe.py loads
    from .probe_support import Run
    from .protocol import JsonObject
else:
    support = sys.modules["torchlint_probe_support"]
    checks = sys.modules["torchlint_probe_checks"]
SEVERITY_ERROR, SEVERITY_WARNING = support.SEVERITY_ERROR, support.SEVERITY_WARNING
count, listing, new_issue = support.count, support.listing, support.new_issue

WORLD_SIZE = 2
STEPS = 2
GROUP_TIMEOUT_S = 60.0  # the process group's own bound on every collective
GRACE_S = 15.0  # how long a rank may run on after the other one ended
MIN_TIME_S = 10.0  # time before the run's deadline below which the check is skipped
END_MARGIN_S = 5.0  # what the probe keeps, after the check, for the checks after it
MAX_ELEMENTS = 1 << 25  # parameters (all together) beyond which the check is skipped: two ranks' gradients on disk
UNUSED_ERROR = "Expected to have finished reduction in the prior iteration"
_INDICES = re.compile(r"did not receive grad for rank \d+: ([\d ]+)")
_exit = os._exit  # bound before user code runs


def unavailable() -> Optional[str]:
    """Why a gloo group cannot run here (None: it can)."""
    if not hasattr(os, "fork"):
        return "--ddp needs os.fork, which this platform does not have"
    import torch.distributed as dist

    if not dist.is_available():
        return ("torch.distributed is not available in this torch build (torch %s): --ddp cannot run here"
                % torch.__version__)
    if not dist.is_gloo_available():
        return "this torch (%s) has no gloo backend: --ddp cannot run here" % torch.__version__
    return None


def check_ddp(model: nn.Module, inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run, device: torch.device,
              state_of: Callable[[nn.Module], checks.State], deadline: float,
              folder: str) -> Tuple[List[JsonObject], str, bool]:
    """(the issues, the check's summary, whether it was skipped). ``deadline``: time.time() by
    which the whole verification is killed; ``folder``: private, for the group's files."""
    reason = unavailable()
    if reason:
        return [], reason, True
    ignored = set(getattr(model, "_ddp_params_and_buffers_to_ignore", None) or ())
    trainable = [name for name, p in model.named_parameters() if p.requires_grad and name not in ignored]
    if not trainable:
        return [], "no parameter requires grad: there is nothing for DistributedDataParallel to reduce", True
    size = sum(p.numel() for p in model.parameters() if not isinstance(p, nn.parameter.UninitializedParameter))
    if size > MAX_ELEMENTS:
        return [], "%d parameter elements: over the %d this check copies" % (size, MAX_ELEMENTS), True
    left = deadline - time.time()
    if left < MIN_TIME_S:
        return [], "too little time left before the timeout (%.0fs)" % left, True
    try:
        if device.type != "cpu":  # the group runs on the CPU, and a forked process must not touch CUDA
            model, inputs = _on_cpu(model, inputs, state_of)
        for name in ("torch.nn.parallel.distributed", "torch._dynamo"):  # DDP imports them: once, not in each rank
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a module that cannot be copied to the CPU: not this check's
        return [], "the module could not be prepared for the CPU group (%s)" % support.describe_exception(exc), True
    work = tempfile.mkdtemp(prefix="ddp-", dir=folder)
    try:
        timeout = max(2.0, min(GROUP_TIMEOUT_S, left - END_MARGIN_S))
        began = time.time()
        ranks = _start(model, inputs, run, state_of, work, timeout)
        killed = _wait(ranks, min(time.time() + timeout + GRACE_S, deadline - END_MARGIN_S))
        results = [_read(work, rank) for rank in range(WORLD_SIZE)]
        waited = "%.0fs" % (time.time() - began)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _judge(results, waited if killed else "", state_of(model), ignored)


def _on_cpu(model: nn.Module, inputs: Tuple[Tuple[Any, ...], Dict[str, Any]],
            state_of: Callable[[nn.Module], checks.State]) -> Tuple[nn.Module, Tuple[Tuple[Any, ...], Dict[str, Any]]]:
    import copy

    state = state_of(model)
    memo = {id(held.tensor): held.tensor for held in state.held if not held.tensor.is_leaf}
    cpu = torch.device("cpu")
    moved = copy.deepcopy(model, memo).to(cpu)
    checks.replace_held(moved, set(vars(nn.Module())), checks.mover(cpu))
    return moved, _to_cpu(inputs)


def _to_cpu(value: Any, depth: int = 0) -> Any:  # (any nesting of inputs)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().requires_grad_(value.requires_grad) if value.is_floating_point() \
            else value.cpu()
    if depth < 4 and type(value) in (list, tuple, dict):
        if type(value) is dict:
            return {key: _to_cpu(item, depth + 1) for key, item in value.items()}
        return type(value)(_to_cpu(item, depth + 1) for item in value)
    return value


# -- the ranks --------------------------------------------------------------------------------------

def _start(model: nn.Module, inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run,
           state_of: Callable[[nn.Module], checks.State], work: str, timeout: float) -> List[int]:
    """The ranks' process ids (fewer than two when a fork failed)."""
    import warnings

    store = os.path.join(work, "store")
    pids: List[int] = []
    for rank in range(WORLD_SIZE):
        with warnings.catch_warnings():  # "use of fork() may lead to deadlocks": the rank only runs torch
            warnings.simplefilter("ignore")
            try:
                pid = os.fork()
            except OSError:
                break
        if pid == 0:
            status = 1
            try:
                _end_with_parent()
                _rank(rank, model, inputs, run, state_of, store, work, timeout)
                status = 0
            except BaseException:  # noqa: B902 - a rank never returns into the probe
                try:
                    import traceback
                    traceback.print_exc()  # (the probe's stderr: its tail is in the report of a failed run)
                except BaseException:  # noqa: B902
                    pass
            finally:
                _exit(status)
        pids.append(pid)
    return pids


def _wait(pids: List[int], deadline: float) -> bool:
    """Reap the ranks; kill those still running at ``deadline``, or GRACE_S after another ended.
    Whether one was killed."""
    running = set(pids)
    killed = False
    ended_at: Optional[float] = None
    while running:
        for pid in list(running):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                running.discard(pid)
                ended_at = ended_at or time.time()
        now = time.time()
        if running and (now >= deadline or (ended_at is not None and now - ended_at > GRACE_S)):
            for pid in running:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    os.waitpid(pid, 0)  # (SIGKILL: it ends)
                except ChildProcessError:
                    pass
            return True
        if running:
            time.sleep(0.05)
    return killed


def _loopback() -> Optional[str]:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except (OSError, AttributeError):
        return None
    return next((name for name in names if name.startswith("lo")), None)


def _rank(rank: int, model: nn.Module, inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], run: Run,
          state_of: Callable[[nn.Module], checks.State], store: str, work: str, timeout: float) -> None:
    from torch.nn.parallel import DistributedDataParallel

    _join_group(rank, store, timeout)
    files = _RankFiles(rank, work)
    out = files.out
    args, kwargs = inputs
    state = state_of(model)
    watched = {held.path: held.tensor for held in state.held
               if held.derived is None and held.tensor.is_leaf and held.tensor.requires_grad}
    if any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters()):
        with torch.no_grad():  # lazy layers: the dry run DDP's documentation asks for
            run("forward", model, *args, **kwargs)
    ignored = set(getattr(model, "_ddp_params_and_buffers_to_ignore", None) or ())
    registered = [(name, p) for name, p in model.named_parameters() if p.requires_grad and name not in ignored]
    out["registered"] = [name for name, _ in registered]
    try:
        ddp = run("wrapping the module in DistributedDataParallel", DistributedDataParallel, model)
    except support.UserError as failure:
        out["error"] = {"stage": "wrap", "step": 0, "error": failure.error, "issue": failure.issue}
        files.save()
        return
    optimizer = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=checks.LEARNING_RATE)
    projections: Dict[Tuple[int, Tuple[int, ...]], torch.Tensor] = {}
    for step in range(1, STEPS + 1):
        if not _step(files, ddp, run, inputs, step, projections, registered):
            break
        _keep_gradients(files, ddp, watched, registered, ignored, step)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        for tensor in watched.values():
            tensor.grad = None
    files.save()


def _join_group(rank: int, store: str, timeout: float) -> None:
    """Set this forked rank up for the gloo group, and join it."""
    import torch.distributed as dist

    # The OpenMP pool of the probe did not survive the fork, and GNU OpenMP hangs when a forked
    # process uses it: one thread, so torch runs every parallel loop inline.
    torch.set_num_threads(1)
    interface = _loopback()
    if interface:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # the ranks are on this machine: no network needed
    try:
        set_level = getattr(dist, "set_debug_level", None)
        level = getattr(getattr(dist, "DebugLevel", None), "INFO", None)
        if set_level is not None and level is not None:
            set_level(level)  # torch's error names the parameters that got no gradient
    except Exception:  # noqa: BLE001 - an older torch: indices only
        pass
    # The group is never destroyed: destroy_process_group() can hang when the other rank has gone
    # first; the rank's process ends as soon as its file is written (_start), and with it the group.
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=timeout))


class _RankFiles:
    """What a rank leaves for the probe (_read): ``out``, what happened (rank<N>.json), and
    ``grads``, the gradients after each step (grads<N>.pt)."""

    def __init__(self, rank: int, work: str) -> None:
        self.rank = rank
        self.work = work
        self.out: JsonObject = {"rank": rank, "steps": 0, "unused": [], "replaced": [], "registered": [],
                                "error": None, "unused_error": None}
        self.grads: List[Dict[str, Optional[torch.Tensor]]] = []

    def save(self) -> None:
        torch.save(self.grads, os.path.join(self.work, "grads%d.pt" % self.rank))
        with open(os.path.join(self.work, "rank%d.json" % self.rank), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(self.out, default=support.safe_text))


def _step(files: _RankFiles, ddp: nn.parallel.DistributedDataParallel, run: Run,
          inputs: Tuple[Tuple[Any, ...], Dict[str, Any]], step: int,
          projections: Dict[Tuple[int, Tuple[int, ...]], torch.Tensor],
          registered: List[Tuple[str, nn.Parameter]]) -> bool:
    """One forward and backward under DDP. False when the steps end here: no output needs a
    gradient, or the user's code raised (``files.out`` says what)."""
    args, kwargs = inputs
    torch.manual_seed(step)  # dropout: the same masks on both ranks
    try:
        with torch.enable_grad():
            output = run("forward", ddp, *args, **kwargs)
        tensors = [t for t in checks.output_tensors(output)
                   if t.requires_grad and (t.is_floating_point() or t.is_complex())]
        if not tensors:
            return False
        loss = _rank_loss(tensors, projections, files.rank)
        run("backward", loss.backward)
    except support.UserError as failure:
        if UNUSED_ERROR in failure.error:
            # torch's own list: "Parameter indices which did not receive grad for rank 0: 2 3"
            match = _INDICES.search(str(failure.exception))
            indices = [int(i) for i in match.group(1).split()] if match else []
            files.out["unused_error"] = {"step": step, "error": failure.error, "names": [
                registered[i][0] for i in indices if i < len(registered)]}
        else:
            files.out["error"] = {"stage": failure.stage, "step": step, "error": failure.error,
                                  "issue": failure.issue}
        return False
    return True


def _keep_gradients(files: _RankFiles, ddp: nn.parallel.DistributedDataParallel, watched: Dict[str, torch.Tensor],
                    registered: List[Tuple[str, nn.Parameter]], ignored: Set[str], step: int) -> None:
    """After a step's backward: every gradient (of the parameters and the ``watched`` plain
    tensors), which of DDP's parameters got none, and which forward replaced."""
    out = files.out
    current = dict(ddp.module.named_parameters())
    with torch.no_grad():
        seen: Dict[str, Optional[torch.Tensor]] = {}
        for name, p in list(current.items()) + list(watched.items()):
            if p.requires_grad and name not in seen and name not in ignored:
                seen[name] = None if p.grad is None else p.grad.detach().to_dense().clone()
        files.grads.append(seen)
    out["unused"].append([name for name, p in registered if p.grad is None])
    out["replaced"] += [name for name, p in registered if name in current and current[name] is not p
                        and name not in out["replaced"]]
    out["steps"] = step


def _rank_loss(tensors: List[torch.Tensor], projections: Dict[Tuple[int, Tuple[int, ...]], torch.Tensor],
               rank: int) -> torch.Tensor:
    """A random projection of the outputs, another on each rank: a gradient DDP did not average
    differs between them."""
    total: Optional[torch.Tensor] = None
    for index, tensor in enumerate(tensors):
        value = tensor.real if tensor.is_complex() else tensor
        key = (index, tuple(value.shape))
        if key not in projections:
            generator = torch.Generator().manual_seed(5000 + 100 * rank + index)
            projections[key] = torch.randn(tuple(value.shape), generator=generator)
        term = (value.float() * projections[key]).sum() / max(value.numel(), 1) ** 0.5
        total = term if total is None else total + term
    assert total is not None  # (tensors is not empty)
    return total


def _read(work: str, rank: int) -> Optional[Tuple[JsonObject, List[Dict[str, Optional[torch.Tensor]]]]]:
    try:
        with open(os.path.join(work, "rank%d.json" % rank), encoding="utf-8") as handle:
            info = json.loads(handle.read())
        grads = torch.load(os.path.join(work, "grads%d.pt" % rank), weights_only=True)
    except Exception:  # noqa: BLE001 - a rank that was killed, or ended, before it wrote them
        return None
    return (info, grads) if isinstance(info, dict) and isinstance(grads, list) else None


# -- what the two ranks say -------------------------------------------------------------------------

def _differs(a: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if a.shape != b.shape:
        return True
    return not torch.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True)


def _judge(results: List[Optional[Tuple[JsonObject, List[Dict[str, Optional[torch.Tensor]]]]]], waited: str,
           state: checks.State, ignored: Set[str]) -> Tuple[List[JsonObject], str, bool]:
    """The issues from the two ranks' files; ``waited``: how long before a rank was killed
    ("": none was); ``state``: of the module as built (where each attribute was stored);
    ``ignored``: the parameters the module asks DDP to leave alone."""
    done = [result for result in results if result is not None]
    if len(done) < WORLD_SIZE:
        why = "killed, still running, after %s" % waited if waited else "one ended before it said anything"
        return [], "the two DistributedDataParallel processes did not both finish (%s)" % why, True
    (first, grads0), (second, grads1) = done
    ran = min(_number(first.get("steps")), _number(second.get("steps")))
    where = "%s under DistributedDataParallel (2 gloo processes on the CPU, find_unused_parameters=False)" % (
        count(ran, "step") if ran else "no step")
    failed = _failed_step(first, second, state)
    if failed is not None:
        return failed
    order = [name for name in first.get("registered") or [] if isinstance(name, str)]
    registered = set(order)
    replaced = {name for info in (first, second) for name in info.get("replaced") or [] if name in registered}
    raised = next((info["unused_error"] for info in (first, second) if isinstance(info.get("unused_error"), dict)),
                  None)
    unused = _without_gradient(first, second, order, replaced, raised)
    differing = _differing_gradients(grads0, grads1, ignored)
    # With a parameter DDP waits for in vain, the buckets around it are never reduced: that is
    # the error below, not news about the parameters that share its bucket.
    held = {h.path: h for h in state.held}
    waiting = bool(unused or replaced)
    created = sorted(name for name in differing if (name not in registered or name in replaced) and name not in held)
    created += sorted(name for name in replaced if name not in created)
    plain = sorted(name for name in differing if name in held)
    odd = sorted(name for name in differing if name in registered and name not in replaced and not waiting)
    issues: List[JsonObject] = []
    if created:
        issues += _created_issues(state, created, None if unused else raised)
    if plain:
        issues += _unregistered_issues(state, [(held[name].holder, name, "") for name in plain])
    if unused:
        issues += _unused_issues(state, unused, raised)
    if odd:
        issues += state.issues(
            "TL908", [(checks.split_path(name), name, "") for name in odd], SEVERITY_ERROR,
            lambda paths, details: "the gradient of %s differed between the two processes after backward() under "
                                   "DistributedDataParallel: it was not reduced" % listing(paths))
    if not issues:
        return [], "%s: the gradients of %s were the same on both processes after backward()" % (
            where, count(len(order), "parameter")), False
    said = []
    if unused:
        said.append("%s got no gradient (DDP waits for %s)" % (count(len(unused), "parameter"),
                                                               "it" if len(unused) == 1 else "them"))
    if created or plain or odd:
        said.append("%s not reduced" % count(len(created) + len(plain) + len(odd), "gradient"))
    return issues, "%s: %s" % (where, "; ".join(said)), False


def _failed_step(first: JsonObject, second: JsonObject,
                 state: checks.State) -> Optional[Tuple[List[JsonObject], str, bool]]:
    """The check's answer when the user's code raised under DDP on a rank (not DDP's own error
    about parameters without a gradient); None when neither did."""
    for info in (first, second):
        error = info.get("error")
        if isinstance(error, dict):
            issue = dict(error.get("issue") or {}) or new_issue("TL908", SEVERITY_WARNING, "", state.verified)
            issue["code"], issue["severity"] = "TL908", SEVERITY_WARNING
            stage = "wrapping the module" if error.get("stage") == "wrap" else "step %s" % error.get("step")
            issue["message"] = ("under DistributedDataParallel (2 gloo processes on the CPU), %s failed, though it ran "
                                "outside DDP: %s" % (stage, support.safe_text(error.get("error"))))
            return [issue], "%s failed under DistributedDataParallel" % stage, False
    return None


def _without_gradient(first: JsonObject, second: JsonObject, order: List[str], replaced: Set[str],
                      raised: Optional[JsonObject]) -> List[str]:
    """DDP's parameters (in its order) that got no gradient on a rank's step, or that DDP's error
    named, less those forward replaced."""
    found: Set[str] = set()
    for info in (first, second):
        for names in info.get("unused") or []:
            found.update(name for name in names if isinstance(name, str))
    found.update(name for name in (raised or {}).get("names") or [] if isinstance(name, str))
    return [name for name in order if name in found and name not in replaced]


def _differing_gradients(grads0: List[Dict[str, Optional[torch.Tensor]]],
                         grads1: List[Dict[str, Optional[torch.Tensor]]], ignored: Set[str]) -> Set[str]:
    """The tensors whose gradient, after some step, differed between the two ranks."""
    differing: Set[str] = set()
    for step0, step1 in zip(grads0, grads1):
        for name in set(step0) | set(step1):
            if name not in ignored and _differs(step0.get(name), step1.get(name)):
                differing.add(name)
    return differing


def _created_issues(state: checks.State, created: List[str], raised: Optional[JsonObject]) -> List[JsonObject]:
    """TL908 for the parameters forward creates or replaces; ``raised``: DDP's error, when no
    unused parameter explains it (the message adds it)."""
    after = ""
    if raised is not None:
        after = "; and DDP, waiting for the gradients of the parameters it wrapped, raised on step %s: \"%s\"" % (
            raised.get("step"), _first_sentence(raised))
    issues = state.issues(
        "TL908", [(checks.split_path(name), name, "") for name in created], SEVERITY_ERROR,
        lambda paths, details: "%s %s not among the parameters DistributedDataParallel wrapped (forward creates "
                               "or replaces %s): DDP never reduces %s gradient, so each process trains its own "
                               "copy and the replicas drift apart%s. Create the parameter once in __init__ "
                               "(nn.LazyLinear and the like when its size comes from the input)" % (
                                   listing(paths), "is" if len(paths) == 1 else "are",
                                   "it" if len(paths) == 1 else "them", "its" if len(paths) == 1 else "their",
                                   after),
        outside_init=True)
    for issue in issues:
        issue["in_forward"] = True  # (the parent places it where forward makes it, as TL906)
    return issues


def _unregistered_issues(state: checks.State, entries: List[Tuple[checks.Holder, str, str]]) -> List[JsonObject]:
    """TL908 for plain tensor attributes that received a gradient DDP never reduces."""
    return state.issues(
        "TL908", entries, SEVERITY_ERROR,
        lambda paths, details: "%s received a gradient that DistributedDataParallel did not reduce: %s not in "
                               "parameters(), and DDP averages only those, so each process keeps its own "
                               "gradient and, trained, its own value. Register %s (nn.Parameter, nn.ModuleList)" % (
                                   listing(paths), "it is" if len(paths) == 1 else "they are",
                                   "it" if len(paths) == 1 else "them"))


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _first_sentence(raised: JsonObject) -> str:
    """``Expected to have finished reduction in the prior iteration before starting a new one``."""
    said = str(raised.get("error") or "")
    return said.split(". ")[0].split(": ", 1)[-1].strip().rstrip(".")


def _unused_issues(state: checks.State, unused: List[str], raised: Optional[JsonObject]) -> List[JsonObject]:
    if raised is not None:
        consequence = "step %s raised \"%s\"" % (raised.get("step"), _first_sentence(raised))
        severity = SEVERITY_ERROR
    else:
        consequence = "DDP waits for their gradients on every step"
        severity = SEVERITY_WARNING

    def message(paths: List[str], details: List[str]) -> str:
        return ("%s got no gradient in backward() with these inputs (not used in forward, or used under no_grad): "
                "under DistributedDataParallel with find_unused_parameters=False (the default), %s. Use %s in "
                "forward, delete %s, or pass find_unused_parameters=True to DistributedDataParallel" % (
                    listing(paths), consequence, "it" if len(paths) == 1 else "them",
                    "it" if len(paths) == 1 else "them"))

    return state.issues("TL908", [(checks.split_path(name), name, "") for name in unused], severity, message)


def _end_with_parent(every: float = 0.5) -> None:
    """End this rank as soon as the probe that forked it is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        _exit(1)
    threading.Thread(target=watch, name="torchlint-ddp-owner", daemon=True).start()
