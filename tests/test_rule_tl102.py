"""TL102: which registering container (or registration loop) each plain container gets, and that
the fixed module computes what the original computed while its layers are now registered."""
from __future__ import annotations

import textwrap

import pytest
import torch

from testkit.rules import fixed, only, preferred, quiet, run


def module(init: str, forward: str, signature: str = "self, dim=4") -> str:
    return textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(%s):
                super().__init__()
        %s

            def forward(self, x):
        %s
        """) % (signature, textwrap.indent(textwrap.dedent(init), " " * 8),
                textwrap.indent(textwrap.dedent(forward), " " * 8))


def fix_and_compare(text: str, *args):
    """The preferred fix's module: same output as the original for the same seed, and every layer
    of the original now among its parameters."""
    finding = only(text, "TL102")
    fix = preferred(finding)
    after = fixed(text, fix)
    torch.manual_seed(0)
    original = run(text)["Net"](*args)
    torch.manual_seed(0)
    mended = run(after)["Net"](*args)
    x = torch.randn(2, 4)
    assert list(original.parameters()) == [], "the example must really have the bug"
    assert torch.equal(original(x), mended(x))
    assert len(list(mended.parameters())) > 0
    quiet(after, "TL102")
    return finding, fix, after, mended


def test_string_keys_become_a_module_dict():
    text = module('self.heads = {"cls": nn.Linear(dim, 4), "box": nn.Linear(dim, 4)}',
                  'return self.heads["cls"](x) + self.heads["box"](x)')
    _, fix, after, model = fix_and_compare(text)
    assert "nn.ModuleDict({" in after and fix.title == "Wrap in `nn.ModuleDict`"
    assert {"heads.cls.weight", "heads.box.bias"} <= set(model.state_dict())


def test_int_keys_read_by_index_become_a_module_list():
    text = module("self.experts = {0: nn.Linear(dim, 4), 1: nn.Linear(dim, 2 * 2)}",
                  "return self.experts[0](x) - self.experts[1](x) * len(self.experts)")
    _, fix, after, model = fix_and_compare(text)
    assert "self.experts = nn.ModuleList([nn.Linear(dim, 4), nn.Linear(dim, 2 * 2)])" in after
    assert fix.title.startswith("Make it `nn.ModuleList`")


@pytest.mark.parametrize("init, forward", [
    # Int keys that are not read by index alone: .items() needs the dict.
    ("self.levels = {2: nn.Linear(dim, 4), 4: nn.Linear(dim, 4)}",
     "return sum(layer(x) * k for k, layer in self.levels.items())"),
    # Int keys that are not 0..n-1.
    ("self.levels = {2: nn.Linear(dim, 4), 4: nn.Linear(dim, 4)}", "return self.levels[2](x) + self.levels[4](x)"),
    # 0..n-1 out of order: a list would build the layers in another order (other initial weights).
    ("self.levels = {1: nn.Linear(dim, 4), 0: nn.Linear(dim, 4)}", "return self.levels[0](x) - self.levels[1](x)"),
    # A dot: nn.ModuleDict raises KeyError "module name can't contain '.'".
    ('self.levels = {"enc.0": nn.Linear(dim, 4), "enc.1": nn.Linear(dim, 4)}', 'return self.levels["enc.1"](x)'),
    # A name nn.ModuleDict already has: KeyError "attribute 'update' already exists".
    ('self.levels = {"update": nn.Linear(dim, 4), "keep": nn.Linear(dim, 4)}', 'return self.levels["update"](x)'),
    # Keys computed at run time.
    ("self.levels = {name: nn.Linear(dim, 4) for name in ('a.b', 'c')}", "return self.levels['a.b'](x)"),
])
def test_keys_a_module_dict_refuses_get_a_registration_loop(init, forward):
    finding, fix, after, model = fix_and_compare(module(init, forward))
    assert "nn.ModuleDict" not in after
    assert "for index, layer in enumerate(self.levels.values()):" in after
    assert 'self.add_module("levels_%d" % index, layer)' in after
    assert isinstance(model.levels, dict)  # the reads and the keys stay what they were
    assert fix.title.startswith("Register each layer with `add_module` after it is filled (nn.ModuleDict takes "
                                "only string keys without a dot, and ")


def test_no_fix_where_no_loop_can_follow_the_filling():
    """Created under an `if`, filled after it: a loop after the filling could meet no attribute."""
    text = module("""\
        if dim:
            self.heads = {}
        for name in ("a.b", "c"):
            self.heads[name] = nn.Linear(dim, 4)
        """, "return x")
    finding = only(text, "TL102")
    assert finding.fixes == ()
    assert finding.message.endswith("no fix: nn.ModuleDict takes only string keys without a dot, and `name` is "
                                    "computed at run time, and torchlint cannot place a registration loop after "
                                    "it is filled")


def test_int_keys_read_with_items_by_a_caller_keep_the_dict():
    text = module("self.levels = {0: nn.Linear(dim, 4), 1: nn.Linear(dim, 4)}", "return self.levels[0](x)")
    text += "\n\ndef level_names(net):\n    return [k for k, _ in net.levels.items()]\n"
    _, fix, after, model = fix_and_compare(text)
    assert fix.title.startswith("Register each layer") and run(after)["level_names"](model) == [0, 1]


def test_a_module_dict_really_refuses_those_keys():
    """Why the loop: the wrap the rule used to offer raises for these keys."""
    for key in ("b.c", "update"):
        with pytest.raises(KeyError):
            torch.nn.ModuleDict({key: torch.nn.Linear(2, 2)})
    with pytest.raises(TypeError):
        torch.nn.ModuleDict({0: torch.nn.Linear(2, 2)})


def test_digit_string_keys_of_a_comprehension_become_a_parameter_dict():
    text = module("self.offsets = {str(i): nn.Parameter(torch.zeros(4)) for i in range(3)}",
                  "return x + self.offsets['0'] + self.offsets['2']")
    _, _, after, model = fix_and_compare(text)
    assert "nn.ParameterDict({str(i)" in after and len(list(model.parameters())) == 3


def test_list_of_lists_of_modules_becomes_module_lists():
    text = module("""\
        self.pairs = []
        for _ in range(2):
            self.pairs.append([nn.Linear(dim, dim), nn.LayerNorm(dim)])
        """, """\
        for layer, norm in self.pairs:
            x = norm(layer(x))
        return x
        """)
    _, _, after, model = fix_and_compare(text)
    assert "self.pairs = nn.ModuleList()" in after
    assert "self.pairs.append(nn.ModuleList([nn.Linear(dim, dim), nn.LayerNorm(dim)]))" in after
    assert "pairs.1.1.weight" in model.state_dict()


def test_list_of_layer_and_function_pairs_registers_the_modules_only():
    text = module("""\
        self.hidden = []
        for _ in range(2):
            self.hidden.append([nn.Linear(dim, dim), torch.tanh])
        """, """\
        for layer, act in self.hidden:
            x = act(layer(x))
        return x
        """)
    finding, _, after, model = fix_and_compare(text)
    assert "list of lists of modules" in finding.message
    assert "if isinstance(layer, nn.Module):" in after
    assert len(list(model.parameters())) == 4 and isinstance(model.hidden, list)


def test_nested_literal_lists_of_modules():
    text = module("self.grid = [[nn.Linear(dim, dim) for _ in range(2)] for _ in range(2)]",
                  "return self.grid[1][0](self.grid[0][1](x))")
    _, _, after, model = fix_and_compare(text)
    assert "nn.ModuleList(nn.ModuleList(row) for row in [[" in after
    assert len(list(model.parameters())) == 8


def test_dict_filled_with_dicts_of_parameters():
    text = module("""\
        self.task = {}
        for name in ("a.b", "c"):
            self.task[name] = {"w": nn.Parameter(torch.randn(dim, dim)), "b": nn.Parameter(torch.zeros(dim))}
        """, "return sum(x @ p['w'] + p['b'] for p in self.task.values())")
    finding, _, after, model = fix_and_compare(text)
    assert "dict of dicts of parameters" in finding.message
    assert 'self.register_parameter("task_%d_%d" % (index, inner), param)' in after
    assert len(list(model.parameters())) == 4


@pytest.mark.parametrize("init", [
    "self.layers = list(layers)",
    "self.layers = tuple(layers)",
    "self.layers = [layer for layer in layers]",
    "self.layers = layers",
    "self.layers = []\nfor layer in layers:\n    self.layers.append(layer)",
])
def test_layers_handed_in_through_star_args(init):
    text = module(init, "for layer in self.layers:\n    x = layer(x)\nreturn x",
                  signature="self, *layers: nn.Module")
    fix = preferred(only(text, "TL102"))
    after = fixed(text, fix)
    layers = (torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    assert list(run(text)["Net"](*layers).parameters()) == []
    model = run(after)["Net"](*layers)
    assert len(list(model.parameters())) == 4
    x = torch.randn(3, 4)
    assert torch.equal(model(x), layers[2](layers[1](layers[0](x))))


@pytest.mark.parametrize("init, signature", [
    ("self.layers = list(layers)", "self, *layers"),  # no annotation: could be anything
    ("self.layers = list(layers)\nself.net = nn.Sequential(*self.layers)", "self, *layers: nn.Module"),
    ("self.layers = [layer for layer in layers]\nfor i, layer in enumerate(self.layers):\n"
     "    self.add_module(str(i), layer)", "self, *layers: nn.Module"),
    ("self.pairs = []\nfor _ in range(2):\n    self.pairs.append([nn.Linear(4, 4), torch.relu])\n"
     "self.flat = nn.ModuleList([layer for layer, _ in self.pairs])", "self"),
    ("self.pairs = [[self.net, torch.relu]]", "self, net=None"),  # existing modules only
    ("self.pairs = []\nfor i in range(2):\n    self.pairs.append([i, 'relu'])", "self"),  # no layer at all
])
def test_quiet_where_nothing_new_is_left_unregistered(init, signature):
    quiet(module(init, "return x", signature=signature), "TL102")


def test_a_plain_list_of_dropouts_says_eval_does_not_reach_them():
    # Parameter-free layers lose nothing to the optimizer: what goes wrong is .eval() (fairseq's
    # wav2letter encoder keeps its dropouts in a list).
    text = (
        "import torch.nn as nn\n\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.convs = nn.ModuleList()\n"
        "        self.dropouts = []\n"
        "        for _ in range(n):\n"
        "            self.convs.append(nn.Conv1d(4, 4, 3))\n"
        "            self.dropouts.append(nn.Dropout(0.1))\n\n"
        "    def forward(self, x):\n"
        "        for conv, drop in zip(self.convs, self.dropouts):\n"
        "            x = drop(conv(x))\n"
        "        return x\n")
    finding = only(text, "TL102")
    assert ".eval() does not reach them (a Dropout or BatchNorm among them stays in training mode)" in finding.message
