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


# -- every fixture, fixed, still runs --------------------------------------------------------

import inspect  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

FIXTURE_DIRS = [Path(__file__).resolve().parent / "fixtures" / name for name in ("rules", "real_bugs")]
ALL_FIXTURES = sorted(p for d in FIXTURE_DIRS for p in d.glob("*.py"))
_CUDA_CALL = re.compile(r"\.cuda\([^()]*\)")
_CUDA_TYPE = re.compile(r"\bcuda\.(\w+Tensor)\b")
_CUDA_NAME = re.compile(r"""(["'])cuda(:\d+)?\1""")


def on_the_cpu(text: str) -> str:
    """The same code with every GPU placement made a CPU one: what is checked is what the fixes
    do to the code, on any machine (`.cuda()` -> `.cpu()`, `torch.cuda.FloatTensor` ->
    `torch.FloatTensor`, `"cuda:0"` -> `"cpu"`)."""
    return _CUDA_NAME.sub(r'\1cpu\1', _CUDA_TYPE.sub(r"\1", _CUDA_CALL.sub(".cpu()", text)))


def example_input(model):
    """An input for the first layer that says its size (what `torchlint verify` derives too)."""
    for layer in model.modules():
        if isinstance(layer, torch.nn.Linear):
            return torch.randn(2, layer.in_features)
        if isinstance(layer, torch.nn.Conv2d):
            return torch.randn(2, layer.in_channels, 16, 16)
        if isinstance(layer, torch.nn.Conv1d):
            return torch.randn(2, layer.in_channels, 16)
        if isinstance(layer, torch.nn.Embedding):
            return torch.randint(0, layer.num_embeddings, (2, 5))
    return None


def stages(text: str, name: str) -> dict:
    """What runs of a fixture: "import", then per Module class "<Class>.build", ".forward", ".step"."""
    done = {}
    namespace = {"__name__": name}
    torch.manual_seed(0)
    try:
        exec(compile(text, name + ".py", "exec"), namespace)
    except Exception as err:  # the buggy original may raise: that is what the fixes are for
        done["import"] = type(err).__name__
        return done
    done["import"] = "ok"
    for cls_name, cls in sorted(namespace.items()):
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == name):
            continue
        required = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if required:
            continue
        try:
            torch.manual_seed(0)
            model = cls()
            done[cls_name + ".build"] = "ok"
            forward = getattr(cls, "forward", None)
            if forward is torch.nn.Module.forward:
                continue  # no forward of its own (a helper module)
            params = list(inspect.signature(forward).parameters.values())[1:] if forward else []
            inputs = example_input(model)
            if inputs is None or len([p for p in params if p.default is p.empty]) != 1:
                continue
            out = model(inputs)
            done[cls_name + ".forward"] = "ok"
            out = out[0] if isinstance(out, (tuple, list)) else out
            trainable = [p for p in model.parameters() if p.requires_grad]
            if isinstance(out, torch.Tensor) and out.requires_grad and trainable:
                optimizer = torch.optim.SGD(trainable, lr=0.01)
                out.float().pow(2).mean().backward()
                optimizer.step()
                done[cls_name + ".step"] = "ok"
        except Exception as err:
            done.setdefault(cls_name + ".failed", type(err).__name__)
    return done


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: "%s/%s" % (p.parent.name, p.name))
def test_every_fixture_still_runs_after_all_its_fixes(path):
    text = path.read_text(encoding="utf-8")
    outcome = fix_text(text, str(path), unsafe=True)
    assert not outcome.errors, outcome.errors
    name = "fixture_" + path.stem
    before = stages(on_the_cpu(text), name)
    after = stages(on_the_cpu(outcome.text), name)
    lost = sorted(stage for stage, result in before.items() if result == "ok" and after.get(stage) != "ok")
    assert not lost, "%s: ran before the fixes, not after: %s\n%s" % (path.name, lost, after)
    # The fixes mend what the bugs broke: a fixture that raised TypeError (a tensor in a parameter
    # slot) or KeyError (attribute then register) on import gets past it.
    if before["import"] in ("TypeError", "KeyError"):
        assert after["import"] != before["import"], "%s: still %s after the fixes" % (path.name, after["import"])
