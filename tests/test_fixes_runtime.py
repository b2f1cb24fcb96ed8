"""The quick fixes, run for real: after a fix, PyTorch itself sees the tensor or the layers.

Each test checks a realistic module twice: the original really has the bug (the
tensor is missing from parameters()/buffers()/state_dict() and .to() leaves it
behind), and the fixed source, executed fresh, really does not.
"""
from __future__ import annotations

from textwrap import dedent

import pytest
import torch

from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


def run_source(text: str) -> dict:
    namespace = {"__name__": "fixed_module"}
    exec(compile(text, "fixed_module.py", "exec"), namespace)
    return namespace


def findings_of(text: str, code: str):
    result = check_source(text, "model.py")
    assert result.parse_error is None and not result.internal_errors
    return [f for f in result.findings if f.code == code]


def pick_fix(finding, kind: str):
    """kind: 'parameter', 'buffer', 'non-persistent' or 'preferred'."""
    for fix in finding.fixes:
        title = fix.title.lower()
        if kind == "preferred" and fix.preferred:
            return fix
        if kind == "parameter" and "parameter" in title and "buffer" not in title:
            return fix
        if kind == "buffer" and "buffer" in title and "non-persistent" not in title:
            return fix
        if kind == "non-persistent" and "non-persistent" in title:
            return fix
    raise AssertionError("no %s fix among %r" % (kind, [f.title for f in finding.fixes]))


def apply_fix(text: str, code: str, attr: str, kind: str) -> str:
    matches = [f for f in findings_of(text, code) if "`self.%s`" % attr in f.message]
    assert len(matches) == 1, "expected one %s finding on self.%s, got %r" % (code, attr, matches)
    fixed = apply_edits(text, pick_fix(matches[0], kind).edits)
    assert not [f for f in findings_of(fixed, code) if "`self.%s`" % attr in f.message], fixed
    return fixed


def assert_converted_by_to(model, tensor_of):
    """model.to(float64) reaches the tensor: its dtype changes with the module."""
    assert tensor_of(model).dtype == torch.float32
    model.to(torch.float64)
    assert tensor_of(model).dtype == torch.float64


# -- TL101 ---------------------------------------------------------------------------------

LAYER_SCALE = dedent("""\
    import torch
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, dim: int, init_values: float = 1e-5):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.mlp = nn.Linear(dim, dim)
            # learnable per-channel scale (CaiT / ConvNeXt layer scale)
            self.gamma = init_values * torch.ones(dim)

        def forward(self, x):
            return x + self.gamma * self.mlp(self.norm(x))
    """)


def test_layer_scale_really_is_lost_without_the_fix():
    model = run_source(LAYER_SCALE)["Block"](4)
    assert "gamma" not in dict(model.named_parameters())
    assert "gamma" not in model.state_dict()
    model.to(torch.float64)
    assert model.gamma.dtype == torch.float32


def test_tl101_parameter_fix_registers_a_trainable_parameter():
    (finding,) = findings_of(LAYER_SCALE, "TL101")
    assert pick_fix(finding, "preferred") == pick_fix(finding, "parameter"), "a learnable scale wants nn.Parameter"
    fixed = apply_fix(LAYER_SCALE, "TL101", "gamma", "parameter")
    model = run_source(fixed)["Block"](4)
    params = dict(model.named_parameters())
    assert isinstance(params["gamma"], torch.nn.Parameter) and params["gamma"].requires_grad
    assert "gamma" in model.state_dict()
    assert torch.equal(model.gamma.detach(), torch.full((4,), 1e-5))

    # The optimizer now trains it.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.gamma.detach().clone()
    model(torch.randn(2, 4)).pow(2).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.gamma.detach())
    assert_converted_by_to(model, lambda m: m.gamma)


CAUSAL_MASK = dedent("""\
    import torch
    from torch import nn


    class CausalSelfAttention(nn.Module):
        def __init__(self, dim: int, block_size: int):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.mask = torch.tril(torch.ones(block_size, block_size)).view(
                1, block_size, block_size
            )  # lower triangle: no peeking ahead

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            t = x.size(1)
            att = (q @ k.transpose(-2, -1)).masked_fill(self.mask[:, :t, :t] == 0, float("-inf"))
            return att.softmax(-1) @ v
    """)


def test_tl101_buffer_fix_registers_a_saved_buffer():
    fixed = apply_fix(CAUSAL_MASK, "TL101", "mask", "buffer")
    assert "# lower triangle: no peeking ahead" in fixed
    namespace = run_source(fixed)
    model = namespace["CausalSelfAttention"](8, 5)
    assert "mask" in dict(model.named_buffers())
    assert "mask" not in dict(model.named_parameters())
    assert "mask" in model.state_dict()
    assert model.mask.shape == (1, 5, 5)

    # Same output as the original module with the same weights.
    torch.manual_seed(0)
    original = run_source(CAUSAL_MASK)["CausalSelfAttention"](8, 5)
    model.qkv.load_state_dict(original.qkv.state_dict())
    x = torch.randn(2, 5, 8)
    assert torch.allclose(model(x), original(x))

    # A state_dict round trip carries it.
    other = namespace["CausalSelfAttention"](8, 5)
    other.load_state_dict(model.state_dict())
    assert_converted_by_to(model, lambda m: m.mask)


def test_tl101_non_persistent_buffer_fix_moves_but_does_not_save():
    fixed = apply_fix(CAUSAL_MASK, "TL101", "mask", "non-persistent")
    model = run_source(fixed)["CausalSelfAttention"](8, 5)
    assert "mask" in dict(model.named_buffers())
    assert "mask" not in model.state_dict()
    assert "mask" not in dict(model.named_parameters())
    assert_converted_by_to(model, lambda m: m.mask)


ROTARY = dedent("""\
    import math

    import torch
    import torch.nn as nn


    class Rotary(nn.Module):
        def __init__(self, dim, base=10000.0):
            super().__init__()
            self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))

        def forward(self, positions):
            return torch.outer(positions.float(), self.inv_freq).cos()
    """)


@pytest.mark.parametrize("kind", ["parameter", "buffer", "non-persistent"])
def test_every_tl101_fix_makes_to_reach_the_tensor(kind):
    fixed = apply_fix(ROTARY, "TL101", "inv_freq", kind)
    model = run_source(fixed)["Rotary"](8)
    registered = dict(model.named_parameters()) if kind == "parameter" else dict(model.named_buffers())
    assert "inv_freq" in registered
    assert ("inv_freq" in model.state_dict()) == (kind != "non-persistent")
    out = model(torch.arange(3))
    assert out.shape == (3, 4)
    assert_converted_by_to(model, lambda m: m.inv_freq)


SEED_LINEAR_ALIASED = dedent("""\
    from torch import randn, matmul
    from torch.nn import Module


    class IncorrectLinear(Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = randn(out_features, in_features)
            self.bias = randn(out_features)

        def forward(self, x):
            return matmul(x, self.weight.T) + self.bias
    """)


def test_tl101_parameter_fix_adds_the_import_it_needs():
    fixed = apply_fix(SEED_LINEAR_ALIASED, "TL101", "weight", "parameter")
    fixed = apply_fix(fixed, "TL101", "bias", "parameter")
    model = run_source(fixed)["IncorrectLinear"](10, 2)
    assert set(dict(model.named_parameters())) == {"weight", "bias"}
    loss = model(torch.randn(1, 10)).pow(2).mean()
    loss.backward()
    assert model.weight.grad is not None and model.bias.grad is not None
    assert_converted_by_to(model, lambda m: m.weight)


REQUIRES_GRAD = dedent("""\
    import torch as T


    class Temperature(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.temperature = T.ones(1, requires_grad=True)  # calibrated on the validation set

        def forward(self, logits):
            return logits / self.temperature
    """)


def test_tl101_requires_grad_prefers_parameter_with_the_file_alias():
    (finding,) = findings_of(REQUIRES_GRAD, "TL101")
    preferred = pick_fix(finding, "preferred")
    fixed = apply_edits(REQUIRES_GRAD, preferred.edits)
    assert "T.nn.Parameter(" in fixed and "import torch\n" not in fixed
    assert "# calibrated on the validation set" in fixed
    model = run_source(fixed)["Temperature"]()
    assert "temperature" in dict(model.named_parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(2, 3)).sum().backward()
    optimizer.step()
    assert model.temperature.item() != 1.0


# -- TL102 ---------------------------------------------------------------------------------

def apply_preferred(text: str, code: str, attr: str) -> str:
    return apply_fix(text, code, attr, "preferred")


def weights_visible(model, layers) -> bool:
    params = {id(p) for p in model.parameters()}
    return all(id(layer.weight) in params for layer in layers)


MLP_LIST = dedent("""\
    import torch
    import torch.nn as nn


    class MLP(nn.Module):
        def __init__(self, dims=(8, 16, 4)):
            super().__init__()
            self.layers = [nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])]

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x
    """)

APPEND_LOOP = dedent("""\
    import torch.nn as nn


    class Tower(nn.Module):
        def __init__(self, depth=3, dim=8):
            super().__init__()
            self.blocks = []
            for _ in range(depth):
                self.blocks.append(nn.Linear(dim, dim))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
    """)

HEADS_DICT = dedent("""\
    from torch import nn


    class MultiTask(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.trunk = nn.Linear(dim, dim)
            self.heads = {
                "cls": nn.Linear(dim, 10),  # classification
                "box": nn.Linear(dim, 4),
            }

        def forward(self, x):
            h = self.trunk(x)
            return {name: head(h) for name, head in self.heads.items()}
    """)

TUPLE_OF_LAYERS = dedent("""\
    import torch.nn as nn


    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)

        def forward(self, x):
            return self.convs[1](self.convs[0](x))
    """)


@pytest.mark.parametrize("text, cls, attr, layers_of", [
    (MLP_LIST, "MLP", "layers", lambda m: list(m.layers)),
    (APPEND_LOOP, "Tower", "blocks", lambda m: list(m.blocks)),
    (HEADS_DICT, "MultiTask", "heads", lambda m: list(m.heads.values())),
    (TUPLE_OF_LAYERS, "Pair", "convs", lambda m: list(m.convs)),
], ids=["list-comprehension", "append-loop", "dict", "tuple"])
def test_tl102_preferred_fix_registers_the_layers(text, cls, attr, layers_of):
    original = run_source(text)[cls]()
    assert not weights_visible(original, layers_of(original)), "the example must really have the bug"

    fixed = apply_preferred(text, "TL102", attr)
    model = run_source(fixed)[cls]()
    layers = layers_of(model)
    assert layers and weights_visible(model, layers)
    assert any(key.startswith(attr + ".") for key in model.state_dict())
    assert_converted_by_to(model, lambda m: layers_of(m)[0].weight)


PARAMETER_LIST = dedent("""\
    import torch
    import torch.nn as nn


    class Mixture(nn.Module):
        def __init__(self, k=3, dim=4):
            super().__init__()
            self.centers = [nn.Parameter(torch.randn(dim)) for _ in range(k)]

        def forward(self, x):
            return torch.stack([(x - c).pow(2).sum(-1) for c in self.centers], -1)
    """)


def test_tl102_parameter_list_fix_registers_the_parameters():
    original = run_source(PARAMETER_LIST)["Mixture"]()
    assert list(original.parameters()) == []

    fixed = apply_preferred(PARAMETER_LIST, "TL102", "centers")
    assert "ParameterList" in fixed
    model = run_source(fixed)["Mixture"]()
    assert len(list(model.parameters())) == 3
    assert {"centers.0", "centers.1", "centers.2"} <= set(model.state_dict())
    assert model(torch.randn(5, 4)).shape == (5, 3)
    assert_converted_by_to(model, lambda m: m.centers[0])


# -- fixes together ------------------------------------------------------------------------

from torchlint.fixing import fix_text  # noqa: E402


def test_adjacent_copy_blocks_are_merged_and_the_variable_import_goes():
    text = dedent("""\
        import torch
        import torch.nn as nn
        from torch.autograd import Variable, grad


        def load(layer, weight, bias):
            layer.weight.data = weight
            layer.bias.data = bias
            x = Variable(torch.zeros(3))
            return x, grad
        """)
    outcome = fix_text(text, "model.py", unsafe=True)
    assert outcome.fixed == 3 and not outcome.errors
    assert outcome.text.splitlines()[2] == "from torch.autograd import grad"
    assert outcome.text.count("no_grad()") == 1
    assert outcome.text.splitlines()[6:9] == ["    with torch.no_grad():", "        layer.weight.copy_(weight)",
                                              "        layer.bias.copy_(bias)"]
    layer = torch.nn.Linear(2, 3)
    run_source(outcome.text)["load"](layer, torch.ones(3, 2), torch.zeros(3))
    assert torch.equal(layer.weight.detach(), torch.ones(3, 2))


def test_an_import_still_used_stays_and_user_blocks_are_not_merged():
    text = dedent("""\
        import torch
        from torch.autograd import Variable


        def step(w, v):
            with torch.no_grad():
                w.add_(1)
            with torch.no_grad():
                v.add_(1)
            return Variable(w), Variable
        """)
    outcome = fix_text(text, "model.py", unsafe=True)
    assert "from torch.autograd import Variable" in outcome.text  # still read (`return ..., Variable`)
    assert outcome.text.count("with torch.no_grad():") == 2  # the author's own blocks


def test_zeroed_legacy_constructor_becomes_torch_zeros():
    text = "import torch\nh = torch.FloatTensor(2, 3).zero_()\n"
    outcome = fix_text(text, "model.py")
    assert outcome.text == "import torch\nh = torch.zeros(2, 3, dtype=torch.float32)\n"
    assert torch.equal(run_source(outcome.text)["h"], torch.zeros(2, 3))


# -- every fixture, fixed, still runs the same ---------------------------------------------
#
# The fix-correctness harness: every file of tests/fixtures/rules, tests/fixtures/real_bugs and
# examples/, fixed as `--fix` and as `--fix --unsafe-fixes` fix it, must still parse, and every run
# the original makes (import, building each Module class that needs no arguments, one forward,
# a backward and optimizer step, the file's `__main__` block) must go the same after the fixes:
# the same output shapes, dtypes and devices, and no exception the original did not raise. The
# runs happen in one subprocess (tests/fix_runner.py: torch imported once, each text bounded in
# time, the whole run too). GPU placements are read as CPU ones and no GPU is visible to the runs,
# so that a CPU-only machine and a CUDA one run the same; TORCHLINT_HARNESS_GPU=1 runs the files as
# written on the GPU instead (devices compared too).

import ast  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HARNESSED = sorted(p for d in (ROOT / "tests" / "fixtures" / "rules", ROOT / "tests" / "fixtures" / "real_bugs",
                               ROOT / "examples") for p in d.glob("*.py"))
RUNNER = Path(__file__).resolve().parent / "fix_runner.py"
HARNESS_SECONDS = 420
MIN_FORWARDS = 40
# Inputs for forwards the runner cannot size from a first layer: file name -> class -> expression.
INPUTS = {
    "positional_encoding.py": {"PositionalEncoding": "torch.randn(2, 10, 64)"},
    "tl301_sizes_and_data.py": {"LegacyConv": "torch.randn(2, 3, 8, 8)"},
    "causal_attention.py": {"CausalSelfAttention": "torch.randn(2, 6, 64)", "MixtureOfExperts": "torch.randn(2, 64)"},
}
# Exceptions a fix may turn into another one: the original stops at the bug the fix mends and the
# fixed file runs on into what a test file cannot provide (a checkpoint on disk, a GPU, a dataset).
GOT_FURTHER = {"FileNotFoundError", "AssertionError", "NameError", "AttributeError"}


def _key(path: Path) -> str:
    return "%s/%s" % (path.parent.name, path.name)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """{file key: {"original"|"fix"|"unsafe-fix": stages}} from one run of tests/fix_runner.py."""
    jobs, fixed_texts = [], {}
    for path in HARNESSED:
        text = path.read_text(encoding="utf-8")
        texts = {"original": text}
        for kind, unsafe in (("fix", False), ("unsafe-fix", True)):
            outcome = fix_text(text, str(path), unsafe=unsafe)
            assert not outcome.errors, (path, outcome.errors)
            texts[kind] = outcome.text
        fixed_texts[_key(path)] = texts
        jobs.append({"name": _key(path).replace("/", "__").replace(".py", ""), "texts": texts,
                     "inputs": INPUTS.get(path.name, {})})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "server"), os.environ.get("PYTHONPATH", "")]))
    if os.environ.get("TORCHLINT_HARNESS_GPU", "") in ("", "0"):
        env["CUDA_VISIBLE_DEVICES"] = ""  # the same runs on every machine: GPU placements read as CPU
    done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(jobs), capture_output=True, text=True,
                          timeout=HARNESS_SECONDS, cwd=str(tmp_path_factory.mktemp("harness")), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)["results"]
    return {_key(path): (fixed_texts[_key(path)], report[job["name"]]) for path, job in zip(HARNESSED, jobs)}


def differences(before: dict, after: dict) -> list:
    """What the fixed run does differently from the original, stage by stage (empty: the same)."""
    problems = []
    for stage, was in before.items():
        now = after.get(stage, "not run")
        if was == now or stage.endswith(".message"):
            continue
        if was == "ok" or not isinstance(was, str) or stage == "__main__.calls":
            problems.append("%s: %s before, %s after" % (stage, was, now))  # changed, or lost
        elif now != "ok" and now not in GOT_FURTHER:
            problems.append("%s: raised %s before, %s after" % (stage, was, now))  # a new exception
    if "timeout" in after:
        problems.append("the fixed file ran past the runner's time limit")
    return problems


@pytest.mark.parametrize("kind", ["fix", "unsafe-fix"])
@pytest.mark.parametrize("path", HARNESSED, ids=_key)
def test_every_fixture_runs_the_same_after_its_fixes(harness, path, kind):
    texts, report = harness[_key(path)]
    ast.parse(texts[kind])
    problems = differences(report["original"], report[kind])
    assert not problems, "%s after %s:\n%s" % (_key(path), kind, "\n".join(problems))
    # The fixes mend what the bugs broke: a fixture that raised TypeError "cannot assign ... as
    # parameter" (a tensor in a parameter slot) or KeyError "attribute ... already exists" (attribute
    # then register) on import gets past it with every fix applied.
    message = report["original"].get("import.message", "")
    if kind == "unsafe-fix" and any(bug in message for bug in ("cannot assign", "already exists")):
        assert report[kind].get("import.message") != message, "%s: still %s after the fixes" % (_key(path), message)


def test_the_harness_runs_most_modules_forward(harness):
    """Worth something only if the modules really build and run forward, and the scripts run."""
    originals = [report["original"] for _, report in harness.values()]
    forwards = [stage for report in originals for stage, got in report.items()
                if stage.endswith(".forward") and isinstance(got, list)]
    assert len(forwards) >= MIN_FORWARDS, len(forwards)
    assert any(report.get("__main__.calls") for report in originals)


def test_harness_reports_a_changed_shape_a_new_exception_and_a_lost_stage():
    before = {"import": "ok", "Net.build": "ok", "Net.forward": ["tensor", [2, 4], "torch.float32", "cpu"],
              "Old.build": "TypeError", "__main__": "ok", "__main__.calls": [["Net", ["tensor", [2, 4]]]]}
    assert differences(before, dict(before)) == []
    assert differences(before, dict(before, **{"Net.forward": ["tensor", [2], "torch.float32", "cpu"]}))
    assert differences(before, dict(before, **{"Net.forward": ["tensor", [2, 4], "torch.float64", "cpu"]}))
    assert differences(before, dict(before, **{"Net.forward": "RuntimeError"}))
    assert differences(before, dict(before, **{"Old.build": "ok"})) == []  # the fix mended it
    assert differences(before, dict(before, **{"Old.build": "RuntimeError"}))  # a new exception
    assert differences(before, {k: v for k, v in before.items() if k != "Net.build"})
    assert differences(before, dict(before, **{"__main__.calls": []}))
