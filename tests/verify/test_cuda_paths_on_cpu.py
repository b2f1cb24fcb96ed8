"""The CUDA-only branch of verification, driven on a machine without a GPU.

On CUDA (any device that is not the CPU) the probe moves the module with ``model.to(device)``,
reports what stayed behind (TL902), moves those tensors itself and carries on, so that the
gradient checks still run (``probe.verify_class``, ``probe_checks.check_device(..., False)``,
``replace_held(..., mover(device))``). The CPU run never takes that branch: it stands in
``.to(torch.float64)``. Here the real ``verify_class`` runs with ``torch.device("meta")``, a
device every CPU build of torch has, in one child process; the classes are given no example
inputs (the child's input_candidates answers none), so TL903/TL904 are skipped (their gradient
values cannot be read on meta) and everything up to them runs as it would on a GPU.

Still covered only on CUDA machines (tests/verify/test_verify_checks.py, test_verify_hostile.py):
pick_cuda's device name, TL903/TL904 on the moved tensors, the "same device" error
classification (meta's mismatch message differs from CUDA's), and torch.cuda.FloatTensor.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from torchlint.verify.runner import PROBE

from verify_helpers import PROBE_CHILD, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class LeftBehind(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(5))
        self.register_buffer("mask", torch.ones(5))
        self.gamma_1 = torch.tensor([1.0]).requires_grad_(True)
        self.layers = [nn.Identity(), nn.Linear(5, 5)]
        self.extras = {"bias": nn.Parameter(torch.zeros(5))}
        self.pair = (torch.ones(5), torch.ones(5))
        self.steps = torch.zeros(3, dtype=torch.long)
        self.cache = [torch.ones(5)]
        self.same_cache = self.cache

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return (x * self.scale * self.mask * self.gamma_1 + self.extras["bias"] + self.pair[0] * self.cache[0])


class AllRegistered(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(5))
        self.register_buffer("mask", torch.ones(5))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x * self.scale * self.mask)
'''

# Runs probe.verify_class on the meta device and says what happened to the module it built.
CHILD = PROBE_CHILD + r'''
result_path = sys.argv[3]
device = torch.device("meta")
built = {}
construct = probe.construct


def keep(cls, request, module, **given):  # the module verify_class builds, to look at it afterwards
    result = construct(cls, request, module, **given)
    built[cls.__name__] = (result, {name: id(value) for name, value in vars(result.model).items()})
    return result


probe.construct = keep
probe.input_candidates = lambda *args, **kwargs: []  # no inputs: gradient values cannot be read on meta
out = {}
for cls in (user_module.LeftBehind, user_module.AllRegistered):
    report = {"name": cls.__name__, "status": "verified", "skip_reason": None, "inputs": None,
              "constructed_with": None, "checks": [], "issues": []}
    request = probe.protocol.ProbeRequest(path=models_path, result_path=result_path, stack_path="", deadline=0)
    probe.verify_class(cls, request, user_module, probe.Result(result_path), report, baseline, device, True)
    model, ids_before = built[cls.__name__][0].model, built[cls.__name__][1]
    state = checks.State(model, baseline, cls, models_path)
    facts = {"report": report,
             "devices": sorted({str(t.device) for _, _, t in checks.tensors_to_move(state)}),
             "forward_shape": list(model(torch.ones(2, 5, device=device)).shape)}
    if cls is user_module.LeftBehind:
        fresh = cls().to(device)  # what the forward meets without the carry-on
        try:
            fresh(torch.ones(2, 5, device=device))
            facts["forward_without_moving"] = "ran"
        except RuntimeError as err:
            facts["forward_without_moving"] = str(err)
        facts.update(
            gamma=[model.gamma_1.requires_grad, model.gamma_1.is_leaf, type(model.gamma_1).__name__],
            bias=[type(model.extras["bias"]).__name__, model.extras["bias"].requires_grad],
            steps=[str(model.steps.dtype), model.steps.requires_grad],
            same_layers_list=id(model.layers) == ids_before["layers"],
            same_cache_alias=model.same_cache is model.cache and str(model.same_cache[0].device) == "meta",
            pair_is_tuple=type(model.pair).__name__)
    out[cls.__name__] = facts
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def on_meta(tmp_path_factory):
    folder = tmp_path_factory.mktemp("meta")
    models = write_module(folder, "models.py", MODELS)
    done = subprocess.run([torch_python(), "-c", CHILD, str(PROBE), str(models), str(folder / "result.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), models


def check_of(report, code):
    (found,) = [c for c in report["checks"] if c["code"] == code]
    return found


def test_what_model_to_left_on_the_cpu_is_reported_with_its_line(on_meta):
    facts, models = on_meta
    report = facts["LeftBehind"]["report"]
    assert report["status"] == "partly verified", report  # no inputs: the gradient checks could not run
    assert report["partial_reason"] == "gradients skipped: no example inputs"
    tl902 = [i for i in report["issues"] if i["code"] == "TL902"]
    by_attribute = {i["owner_attribute"]: i for i in tl902}
    assert set(by_attribute) == {"gamma_1", "layers", "extras", "pair", "steps", "cache"}, tl902
    for issue in tl902:
        assert "left behind by model.to(meta)" in issue["message"] and "still on cpu" in issue["message"], issue
    assert by_attribute["gamma_1"]["line"] == line_of(models, "self.gamma_1 =")
    assert by_attribute["layers"]["line"] == line_of(models, "self.layers =")
    # The registered ones moved with the module: not reported.
    assert not any(i.get("owner_attribute") in ("scale", "mask") for i in report["issues"])


def test_what_was_left_behind_is_moved_and_the_run_carries_on(on_meta):
    facts, _ = on_meta
    left = facts["LeftBehind"]
    check = check_of(left["report"], "TL902")
    assert check["status"] == "failed" and "what was left behind was moved for the checks that follow" in check["summary"]
    assert left["devices"] == ["meta"]  # every tensor the tree holds, registered or not
    # Without the move the forward fails on the device mismatch; after it, it runs there.
    assert "device" in left["forward_without_moving"] and left["forward_without_moving"] != "ran"
    assert left["forward_shape"] == [2, 5]
    # Phases after the move still ran: no inputs here, so the gradient checks say why they were skipped.
    for code in ("TL903", "TL904"):
        assert check_of(left["report"], code)["status"] == "skipped"
        assert "no example inputs" in check_of(left["report"], code)["summary"]


def test_the_move_keeps_what_each_tensor_was(on_meta):
    left = on_meta[0]["LeftBehind"]
    assert left["gamma"] == [True, True, "Tensor"]  # still a trainable leaf, still not a Parameter
    assert left["bias"] == ["Parameter", True]
    assert left["steps"] == ["torch.int64", False]
    assert left["same_layers_list"] and left["same_cache_alias"]  # lists changed in place: aliases see it
    assert left["pair_is_tuple"] == "tuple"


def test_a_module_that_registers_everything_moves_without_a_finding(on_meta):
    clean = on_meta[0]["AllRegistered"]
    assert clean["report"]["issues"] == []
    check = check_of(clean["report"], "TL902")
    assert check["status"] == "passed" and check["summary"] == "after model.to(meta)"
    assert clean["devices"] == ["meta"] and clean["forward_shape"] == [2, 5]
