"""TL202, TL203, TL301: exact fix outputs, the look-alikes that stay quiet, and fixed code run with torch."""
from __future__ import annotations

import textwrap

import pytest

from torchlint.analysis.findings import Severity
from rule_helpers import by_title, check, findings, fixed, only, preferred, quiet, run


# == TL202 stale-optimizer ===================================================================

FINETUNE = """\
import torch.nn as nn
import torch.optim as optim
from torchvision import models

model = models.resnet18(weights=None)
optimizer = optim.SGD(model.parameters(), lr=0.01)  # built too early
model.fc = nn.Linear(512, 10)
train(model, optimizer)
"""


def test_tl202_finds_the_head_swap_with_related_information():
    finding = only(FINETUNE, "TL202")
    assert finding.severity is Severity.WARNING
    assert (finding.range.start.line, finding.range.start.column) == (7, 0)
    assert (finding.range.end.line, finding.range.end.column) == (7, 8)  # the target `model.fc`
    assert "line 6" in finding.message and "`model.fc`" in finding.message
    (related,) = finding.related
    assert related.range.start.line == 6


def test_tl202_move_fix_is_preferred_and_keeps_the_comment():
    finding = only(FINETUNE, "TL202")
    fix = preferred(finding)
    assert fix.title.startswith("Build `optimizer` after")
    assert not fix.is_safe
    assert fixed(FINETUNE, fix).splitlines()[5:8] == [
        "model.fc = nn.Linear(512, 10)",
        "optimizer = optim.SGD(model.parameters(), lr=0.01)  # built too early",
        "train(model, optimizer)",
    ]


def test_tl202_one_fix_rebuilds_the_optimizer_and_one_adds_the_group():
    finding = only(FINETUNE, "TL202")
    # Moving the build is the rebuild here: no second fix that builds the optimizer again.
    assert [f.title.split(" ")[0] for f in finding.fixes] == ["Build", "Add"]
    used_in_between = FINETUNE.replace("model.fc = nn.Linear(512, 10)",
                                       "print(optimizer)\nmodel.fc = nn.Linear(512, 10)")
    (finding_used,) = findings(used_in_between, "TL202")
    recreate = by_title(finding_used, "Re-create `optimizer`")
    assert [f.title.split(" ")[0] for f in finding_used.fixes] == ["Add", "Re-create"]
    assert fixed(used_in_between, recreate).splitlines()[7:9] == [
        "model.fc = nn.Linear(512, 10)",
        "optimizer = optim.SGD(model.parameters(), lr=0.01)",
    ]
    add = by_title(finding, "Add the new parameters")
    assert fixed(FINETUNE, add).splitlines()[7] == 'optimizer.add_param_group({"params": model.fc.parameters()})'
    assert not recreate.is_safe and not add.is_safe


MULTILINE_IN_BRANCH = """\
import torch
import torch.nn as nn

def build(model, num_classes):
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=1e-3,
    )
    if num_classes != 1000:
        model.classifier[6] = nn.Linear(4096, num_classes)
    return model, optimizer
"""


def test_tl202_recreate_reindents_a_multiline_build_into_the_branch():
    finding = only(MULTILINE_IN_BRANCH, "TL202")
    assert "`model.classifier[6]`" in finding.message
    titles = [f.title for f in finding.fixes]
    assert not any(t.startswith("Build") for t in titles)  # different blocks: no move
    fix = preferred(finding)
    assert fix.title.startswith("Re-create")
    assert fixed(MULTILINE_IN_BRANCH, fix).splitlines()[9:14] == [
        "        model.classifier[6] = nn.Linear(4096, num_classes)",
        "        optimizer = torch.optim.Adam(",
        "            model.parameters(),",
        "            lr=1e-3,",
        "        )",
    ]


def test_tl202_prefers_add_param_group_when_a_scheduler_holds_the_optimizer():
    text = """\
    import torch.nn as nn
    from torch import optim

    def setup(model):
        opt = optim.SGD(model.parameters(), lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, 10)
        model.fc = nn.Linear(8, 2)
        return opt, sched
    """
    finding = only(text, "TL202")
    assert preferred(finding).title.startswith("Add the new parameters to `opt`")
    assert not any(f.title.startswith("Build") for f in finding.fixes)


def test_tl202_parameters_collected_in_a_list_get_only_add_param_group():
    text = """\
    import torch
    import torch.nn as nn

    def setup(model):
        decay = []
        for name, p in model.named_parameters():
            decay.append(p)
        opt = torch.optim.AdamW([{"params": decay}], lr=0.1)
        model.fc.bias = nn.Parameter(torch.zeros(10))
        return opt
    """
    finding = only(text, "TL202")
    assert "new parameter" in finding.message
    (fix,) = finding.fixes
    assert fix.preferred
    assert fixed(text, fix).splitlines()[9] == '    opt.add_param_group({"params": [model.fc.bias]})'


def test_tl202_self_optimizer_in_a_method():
    text = """\
    import torch
    import torch.nn as nn

    class Trainer:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.model.head = nn.Linear(16, 4)
    """
    finding = only(text, "TL202")
    assert preferred(finding).title.startswith("Re-create `self.optimizer`")
    assert fixed(text, preferred(finding)).splitlines()[8] == \
        "        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)"


def test_tl202_one_finding_when_two_optimizers_hold_the_model():
    text = """\
    import torch.nn as nn
    import torch.optim as optim
    model = nn.Sequential(nn.Linear(4, 4))
    sgd = optim.SGD(model.parameters(), lr=0.1)
    adam = optim.Adam(model.parameters())
    model.head = nn.Linear(4, 2)
    print(sgd, adam)
    """
    assert len(findings(text, "TL202")) == 1


def test_tl202_statement_sharing_a_line_gets_a_semicolon_insert():
    text = """\
    import torch.nn as nn
    import torch.optim as optim
    model = nn.Sequential(nn.Linear(4, 4))
    opt = optim.SGD(model.parameters(), lr=0.1)
    if True: model.head = nn.Linear(4, 2)
    opt.step()
    """
    finding = only(text, "TL202")
    add = by_title(finding, "Add the new parameters")
    assert fixed(text, add).splitlines()[4] == \
        'if True: model.head = nn.Linear(4, 2); opt.add_param_group({"params": model.head.parameters()})'


@pytest.mark.parametrize("body", [
    # the head swapped first
    "model.fc = nn.Linear(512, 10)\nopt = optim.SGD(model.parameters(), lr=0.1)\nopt.step()",
    # rebuilt, re-bound by a helper, or extended after the swap
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Linear(512, 10)\n"
    "opt = optim.SGD(model.parameters(), lr=0.1)\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Linear(512, 10)\nopt = make(model)\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Linear(512, 10)\n"
    "opt.add_param_group({'params': model.fc.parameters()})\nopt.step()",
    # exclusive branches
    "if flag:\n    opt = optim.SGD(model.parameters(), lr=0.1)\nelse:\n    model.fc = nn.Linear(512, 10)\n"
    "    opt = None\nopt.step()",
    "try:\n    opt = optim.SGD(model.parameters(), lr=0.1)\nexcept ValueError:\n"
    "    model.fc = nn.Linear(512, 10)\n    opt = None\nopt.step()",
    # the same module wrapped or moved, parameter-free layers, weight tying
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.encoder = nn.DataParallel(model.encoder)\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = model.fc.to('cuda')\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Identity()\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.decoder.weight = model.embed.weight\nopt.step()",
    # another part of the model, or another object
    "opt = optim.SGD(model.backbone.parameters(), lr=0.1)\nmodel.head = nn.Linear(512, 10)\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nother.fc = nn.Linear(512, 10)\nopt.step()",
    # the root itself re-bound (same object moved), and values that are not modules
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel = model.cuda()\nopt.step()",
    "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.name = 'resnet'\nmodel.fc = build_head()\nopt.step()",
    # a fresh optimizer per stage, swapped at the end of the stage, never used afterwards
    "for stage in stages:\n    opt = optim.SGD(model.parameters(), lr=0.1)\n    train(model, opt)\n"
    "    model.fc = nn.Linear(512, stage)",
])
def test_tl202_stays_quiet(body):
    quiet(_in_function(body), "TL202")


def _in_function(body):
    return "import torch.nn as nn\nimport torch.optim as optim\n\ndef f(model, other, flag, stages, make):\n" \
        + textwrap.indent(body, "    ") + "\n"


def test_tl202_quiet_template_does_find_the_plain_bug():
    body = "opt = optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Linear(512, 10)\nopt.step()"
    assert len(findings(_in_function(body), "TL202")) == 1


def test_tl202_stage_loop_that_uses_the_optimizer_after_the_swap_is_found():
    text = """\
    import torch.nn as nn
    import torch.optim as optim

    def f(model, stages):
        opt = optim.SGD(model.parameters(), lr=0.1)
        for stage in stages:
            opt.step()
            model.fc = nn.Linear(512, stage)
    """
    # the next iteration steps the old optimizer
    assert len(findings(text, "TL202")) == 1


RUNNABLE_FINETUNE = """\
import torch
import torch.nn as nn
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.body(x)))

torch.manual_seed(0)
model = Net()
optimizer = optim.SGD(model.parameters(), lr=0.1)
model.fc = nn.Linear(8, 2)
before = model.fc.weight.detach().clone()
loss = model(torch.randn(5, 4)).pow(2).sum()
optimizer.zero_grad()
loss.backward()
optimizer.step()
head_trained = not torch.equal(before, model.fc.weight)
"""


def test_tl202_every_fix_makes_the_new_head_train():
    assert run(RUNNABLE_FINETUNE)["head_trained"] is False  # the bug is real
    finding = only(RUNNABLE_FINETUNE, "TL202")
    assert len(finding.fixes) == 2
    for fix in finding.fixes:
        result = fixed(RUNNABLE_FINETUNE, fix)
        assert findings(result, "TL202") == []
        assert run(result)["head_trained"] is True, fix.title


RUNNABLE_SURGERY = """\
import torch
import torch.nn as nn
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.mid = nn.Linear(8, 8, bias=False)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.mid(torch.relu(self.body(x)))))

torch.manual_seed(0)
model = Net()
optimizer = optim.SGD(model.parameters(), lr=0.1)
model.body = nn.Linear(4, 8)
model.mid.weight = nn.Parameter(model.mid.weight[:6].clone())
model.fc = nn.Linear(6, 2)
before = [p.detach().clone() for p in model.parameters()]
model(torch.randn(5, 4)).pow(2).sum().backward()
optimizer.step()
all_trained = all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
"""


def test_tl202_replacements_in_a_row_share_one_rebuild():
    from torchlint.fixing import fix_text

    assert run(RUNNABLE_SURGERY)["all_trained"] is False  # the bug is real
    found = findings(RUNNABLE_SURGERY, "TL202")
    assert len(found) == 3
    # Each finding's rebuild moves the build below the last replacement: the same edits, so one
    # quick fix mends all three and applying all of them builds the optimizer once.
    moves = [by_title(f, "Build `optimizer` after") for f in found]
    assert moves[0].edits == moves[1].edits == moves[2].edits
    assert moves[0].title.endswith("(move line 17 below line 20)") and moves[2].title.endswith("(move line 17)")
    result = fix_text(RUNNABLE_SURGERY, "surgery.py", unsafe=True).text
    assert result.count("optim.SGD(") == 1
    assert result.splitlines()[16:20] == [
        "model.body = nn.Linear(4, 8)",
        "model.mid.weight = nn.Parameter(model.mid.weight[:6].clone())",
        "model.fc = nn.Linear(6, 2)",
        "optimizer = optim.SGD(model.parameters(), lr=0.1)",
    ]
    assert run(result)["all_trained"] is True


def test_tl202_one_rebuild_per_run_and_a_use_between_splits_the_run():
    from torchlint.fixing import fix_text

    text = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Trainer:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.model.body = nn.Linear(16, 16)
            self.model.head = nn.Linear(16, 4)
            self.optimizer.step()
            self.model.head = nn.Linear(16, 2)
            self.model.out = nn.Linear(2, 2)
    """)
    build = "self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)"
    assert len(findings(text, "TL202")) == 4
    lines = fix_text(text, "trainer.py", unsafe=True).text.splitlines()
    # One copy (the attribute cannot move) after the first run, before the step that needs it; after the step the optimizer
    # has been used (a copy would lose its state), so each later layer is added to it instead.
    assert [line.strip() for line in lines[6:]] == [
        build, "self.model.body = nn.Linear(16, 16)", "self.model.head = nn.Linear(16, 4)", build,
        "self.optimizer.step()",
        "self.model.head = nn.Linear(16, 2)",
        'self.optimizer.add_param_group({"params": self.model.head.parameters()})',
        "self.model.out = nn.Linear(2, 2)",
        'self.optimizer.add_param_group({"params": self.model.out.parameters()})',
    ]
    assert lines.count("        " + build) == 2


# == TL203 discarded-move ====================================================================

def test_tl203_assigns_the_result_and_keeps_the_rest():
    text = """\
    import torch
    device = torch.device("cuda")

    def step(images: torch.Tensor):
        images.to(device, non_blocking=True)  # move the batch
        return images
    """
    finding = only(text, "TL203")
    assert finding.severity is Severity.WARNING
    assert (finding.range.start.line, finding.range.start.column) == (5, 4)
    fix = preferred(finding)
    assert fix.is_safe
    assert fixed(text, fix).splitlines()[4] == "    images = images.to(device, non_blocking=True)  # move the batch"


def test_tl203_registered_buffer_in_forward():
    text = """\
    import torch
    import torch.nn as nn

    class PE(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pe", torch.zeros(10, 4))

        def forward(self, x):
            self.pe.to(x.device)
            return x + self.pe
    """
    finding = only(text, "TL203")
    assert "`self.pe`" in finding.message
    assert fixed(text, preferred(finding)).splitlines()[9] == "        self.pe = self.pe.to(x.device)"


def test_tl203_dtype_conversions_and_type_with_argument():
    text = """\
    import torch
    x = torch.zeros(3)
    x.half()
    x.type(torch.float64)
    x.type()
    """
    lines = [f.range.start.line for f in findings(text, "TL203")]
    assert lines == [3, 4]


def test_tl203_global_tensor_in_a_function_is_found_without_a_fix():
    text = """\
    import torch
    mean = torch.tensor([0.5])

    def prepare():
        mean.cuda()
    """
    finding = only(text, "TL203")
    assert finding.fixes == ()  # `mean = mean.cuda()` here would raise UnboundLocalError


@pytest.mark.parametrize("statement", [
    "model.to(device)",
    "model.cuda()",
    "self_encoder.to(device)",
    "batch.to(device)",  # unknown: a batch from a loader
    "x.T.cuda()",  # not something `x.T = ...` could re-bind
    "x[0].cuda()",
    "w.cuda()",  # a Parameter: the obvious fix would be TL104
    "x.type()",
    "torch.randn(3).cuda()",
])
def test_tl203_stays_quiet(statement):
    quiet(_tl203_template % statement, "TL203")


def test_tl203_quiet_template_does_find_a_tensor_move():
    assert len(findings(_tl203_template % "x.cuda()", "TL203")) == 1


_tl203_template = """\
    import torch
    import torch.nn as nn
    device = torch.device("cuda")
    model = nn.Linear(3, 3)
    self_encoder = nn.Sequential(nn.Linear(3, 3))
    w = nn.Parameter(torch.zeros(3))
    x = torch.zeros(3)

    def f(batch):
        %s
    """


def test_tl203_module_attribute_moves_stay_quiet():
    text = """\
    import torch.nn as nn

    class AE(nn.Module):
        def __init__(self, dev):
            super().__init__()
            self.encoder = nn.Linear(3, 3)
            self.encoder.to(dev)
            self.encoder.half()
    """
    quiet(text, "TL203")


def test_tl203_fixed_code_really_converts():
    text = """\
    import torch
    x = torch.zeros(3)
    x.double()
    """
    assert run(text)["x"].dtype.is_floating_point and str(run(text)["x"].dtype) == "torch.float32"
    result = fixed(text, preferred(only(text, "TL203")))
    assert str(run(result)["x"].dtype) == "torch.float64"


# == TL301 legacy-constructor ================================================================

def fix_line(check, text, line=None, title=None):
    """The given (or preferred) fix of the single TL301 finding, applied; returns the changed line."""
    finding = only(text, "TL301")
    fix = by_title(finding, title) if title else preferred(finding)
    lines = fixed(text, fix).splitlines()
    return lines[line if line is not None else -1], fix


@pytest.mark.parametrize("call, expected, safe", [
    ("torch.FloatTensor([1, 2, 3])", "torch.tensor([1, 2, 3], dtype=torch.float32)", True),
    ("torch.cuda.LongTensor([[1], [2]])", 'torch.tensor([[1], [2]], dtype=torch.int64, device="cuda")', True),
    ("torch.IntTensor([i for i in range(3)])", "torch.tensor([i for i in range(3)], dtype=torch.int32)", True),
    ("torch.FloatTensor()", "torch.empty(0, dtype=torch.float32)", True),
    ("torch.cuda.FloatTensor()", 'torch.empty(0, dtype=torch.float32, device="cuda")', True),
    ("torch.FloatTensor(3, 4)", "torch.empty(3, 4, dtype=torch.float32)", True),
    ("torch.DoubleTensor(5)", "torch.empty(5, dtype=torch.float64)", True),
    ("torch.ByteTensor(x.size())", "torch.empty(x.size(), dtype=torch.uint8)", True),
    ("torch.FloatTensor(len(x))", "torch.empty(len(x), dtype=torch.float32)", True),
    ("torch.cuda.FloatTensor(2, device='cuda:1')", "torch.empty(2, device='cuda:1', dtype=torch.float32)", True),
    ("torch.FloatTensor(device='cpu')", "torch.empty(0, device='cpu', dtype=torch.float32)", True),
    ("torch.FloatTensor(*shape)", "torch.empty(*shape, dtype=torch.float32)", True),
    ("torch.FloatTensor(np.zeros(3))", "torch.tensor(np.zeros(3), dtype=torch.float32)", True),
    ("torch.FloatTensor(x.tolist())", "torch.tensor(x.tolist(), dtype=torch.float32)", True),
    ("torch.LongTensor(x.size(0) * 2)", "torch.empty(x.size(0) * 2, dtype=torch.int64)", True),
    ("torch.FloatTensor(ones)", "torch.as_tensor(ones, dtype=torch.float32)", False),
    ("torch.Tensor([1, 2])", "torch.tensor([1, 2], dtype=torch.get_default_dtype())", True),
    ("torch.Tensor([[0.5, 1]])", "torch.tensor([[0.5, 1]])", True),
    ("torch.Tensor(2, 3)", "torch.empty(2, 3)", True),
    ("torch.Tensor()", "torch.empty(0)", True),
])
def test_tl301_typed_constructor_fixes(call, expected, safe):
    line, fix = fix_line(check, "import numpy as np\nimport torch\nones = torch.ones(3)\nt = %s\n" % call)
    assert line == "t = " + expected
    assert fix.is_safe is safe


@pytest.mark.parametrize("call", ["torch.FloatTensor(n)", "torch.Tensor(idxs)", "torch.LongTensor(load())",
                                  "torch.Tensor(self_mean)"])
def test_tl301_argument_of_unknown_kind_gets_no_fix(call):
    """Data or a size? Reading it either way breaks the code when it is the other: no fix, and why."""
    finding = only("import torch\nt = %s\n" % call, "TL301")
    assert finding.fixes == ()
    assert "no fix offered: torchlint cannot tell whether" in finding.message


def test_tl301_tuple_that_reads_like_a_shape_keeps_the_data_reading_first():
    """`torch.FloatTensor((n, 1))` builds a 2-element tensor: the preferred fix does the same."""
    finding = only("import torch\nt = torch.FloatTensor((x.shape[0], 1))\n", "TL301")
    assert [(f.title.split("`")[1].split("(")[0], f.is_safe, f.preferred) for f in finding.fixes] == [
        ("torch.tensor", False, True), ("torch.empty", False, False)]


SIZED_BY_PARAMETERS = """\
import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, {signature}):
        super().__init__()
        {extra}
        self.bias = nn.Parameter(torch.Tensor({name}).zero_())
"""


@pytest.mark.parametrize("signature, extra, name, reading", [
    ("in_features, out_features", "self.weight = nn.Parameter(torch.Tensor(out_features, in_features))",
     "out_features", "sizes"),
    ("width, classes", "self.fc = nn.Linear(width, classes)", "classes", "sizes"),
    ("count: int", "pass", "count", "sizes"),
    ("count=4", "pass", "count", "sizes"),
    ("count=DEFAULT", "self.fc = nn.Linear(count, count)", "count", "sizes"),  # the default says nothing
    ("num_anchors", "pass", "num_anchors", "sizes"),
    ("size", "self.steps = [i for i in range(size)]", "size", "sizes"),
    ("values=(1.0, 2.0)", "pass", "values", "data"),
    ("values: list", "pass", "values", "data"),
    ("items", "count = 0\n        for _ in items:\n            count += 1", "count", "sizes"),
    ("items", "count = 0\n        for _ in items:\n            count += 0.5", "count", None),
    ("init", "pass", "init", None),
    ("width, init", "self.fc = nn.Linear(width, width)", "init", None),
])
def test_tl301_reads_a_parameter_by_its_annotation_default_use_or_name(signature, extra, name, reading):
    text = SIZED_BY_PARAMETERS.format(signature=signature, extra=extra, name=name)
    line = text.splitlines().index("        self.bias = nn.Parameter(torch.Tensor(%s).zero_())" % name) + 1
    finding = [f for f in check(text).findings if f.code == "TL301" and f.range.start.line == line][0]
    functions = [f.title.split("`")[1].split("(")[0] for f in finding.fixes]
    assert functions == {"sizes": ["torch.zeros"], "data": ["torch.tensor"], None: []}[reading]


def test_tl301_size_fix_keeps_the_bias_a_vector():
    """The reported bug: `torch.Tensor(out_channels)` read as data made the bias one number."""
    text = SIZED_BY_PARAMETERS.format(signature="in_channels, out_channels",
                                      extra="self.conv = nn.Conv2d(in_channels, out_channels, 3)", name="out_channels")
    finding = [f for f in check(text).findings if f.code == "TL301"][0]
    fix = preferred(finding)
    assert fix.is_safe
    old, new = run(text)["Layer"](3, 8), run(fixed(text, fix))["Layer"](3, 8)
    assert new.bias.shape == old.bias.shape == (8,)
    assert new.bias.dtype == old.bias.dtype


def test_tl301_is_deprecated_and_covers_the_constructor_name():
    finding = only("import torch\nt = torch.cuda.FloatTensor([1.0]).zero_()\n", "TL301")
    # A deprecation alone: a hint, tagged deprecated.
    assert finding.deprecated and finding.severity is Severity.HINT
    assert (finding.range.start.column, finding.range.end.column) == (4, 26)
    assert 'torch.tensor(data, dtype=torch.float32, device="cuda")' in finding.message


def test_tl301_uses_the_file_alias():
    line, _ = fix_line(check, "import torch as T\nt = T.cuda.FloatTensor(2, 3)\n")
    assert line == 't = T.empty(2, 3, dtype=T.float32, device="cuda")'


def test_tl301_adds_a_single_import_torch_when_missing():
    text = "from torch import FloatTensor\n\nt = FloatTensor([1, 2])\n"
    finding = only(text, "TL301")
    assert fixed(text, preferred(finding)) == \
        "import torch\nfrom torch import FloatTensor\n\nt = torch.tensor([1, 2], dtype=torch.float32)\n"


def test_tl301_multiline_call_keeps_its_comment():
    text = "import torch\nt = torch.FloatTensor(\n    [1, 2],  # two\n)\n"
    finding = only(text, "TL301")
    assert fixed(text, preferred(finding)) == \
        "import torch\nt = torch.tensor(\n    [1, 2], dtype=torch.float32,  # two\n)\n"


@pytest.mark.parametrize("call, expected", [
    ("Variable(x)", "x"),
    ("Variable(x, volatile=True)", "x"),
    ("Variable(x, requires_grad=False)", "x"),
    ("Variable(x, requires_grad=True)", "x.detach().requires_grad_()"),
    ("Variable(x, requires_grad=flag)", "x.detach().requires_grad_(flag)"),
    ("Variable(x + 1)", "(x + 1).detach()"),  # an expression: it may carry a graph
    ("Variable(x * 2, requires_grad=True)", "(x * 2).detach().requires_grad_()"),
    ("Variable(torch.randn(3), requires_grad=True)", "torch.randn(3).requires_grad_()"),
    ("Variable(torch.randn(3).type(dtype), requires_grad=True)", "torch.randn(3).type(dtype).requires_grad_()"),
    # not a fresh factory: it may carry a graph, which Variable() cut
    ("Variable(x.float(), requires_grad=True)", "x.float().detach().requires_grad_()"),
    ("Variable(w)", "w.detach()"),  # a Parameter: Variable() really detached it
])
def test_tl301_variable_fixes(call, expected):
    text = ("import torch\nimport torch.nn as nn\nfrom torch.autograd import Variable\n"
            "x = torch.ones(3)\nw = nn.Parameter(torch.ones(3))\ny = %s\n" % call)
    line, fix = fix_line(check, text)
    assert line == "y = " + expected
    assert fix.is_safe


def test_tl301_variable_of_an_unknown_value_keeps_the_detach():
    """`Variable(out)` on a model's output cut the graph: plain `out` would let gradients through."""
    text = """\
    from torch.autograd import Variable

    def train(model, loader):
        for inputs in loader:
            inputs = Variable(inputs)
            out = Variable(model(inputs))
    """
    finding = [f for f in check(textwrap.dedent(text)).findings if f.code == "TL301"]
    lines = [fixed(text, preferred(f)).splitlines()[f.range.start.line - 1].strip() for f in finding]
    assert lines == ["inputs = inputs.detach()", "out = model(inputs).detach()"]
    assert all(preferred(f).is_safe for f in finding)


def test_tl301_torch_tensor_as_a_type_stays_quiet():
    text = """\
    from typing import List
    import torch

    class Masked(torch.Tensor):
        @staticmethod
        def __new__(cls, data: torch.Tensor):
            return torch.Tensor._make_subclass(cls, data)

    def f(xs: List[torch.Tensor]) -> torch.Tensor:
        assert isinstance(xs[0], (torch.Tensor, torch.FloatTensor))
        torch.set_default_tensor_type(torch.FloatTensor)
        return xs[0].type(torch.cuda.HalfTensor)
    """
    quiet(text, "TL301")


def test_tl101_and_tl301_both_fire_on_the_seed_line():
    text = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.g = torch.cuda.FloatTensor([1.0])

        def forward(self, x):
            return x * self.g
    """
    codes = sorted(f.code for f in check(textwrap.dedent(text)).findings if f.range.start.line == 7)
    assert codes == ["TL101", "TL301"]


EQUIVALENT_ON_CPU = [
    "torch.FloatTensor([1, 2, 3])",
    "torch.LongTensor([1.7, -1.7])",
    "torch.IntTensor([i * 2 for i in range(4)])",
    "torch.Tensor([1, 2])",
    "torch.Tensor([[0.5, 1]])",
    "torch.BoolTensor([1, 0])",
    "torch.ByteTensor((1, 2))",
    "Variable(torch.arange(3.0))",
    "Variable(torch.ones(2), requires_grad=True)",
    "Variable(x * 2, requires_grad=True)",
    "Variable(w)",
    "Variable(w * 2, requires_grad=True)",
    "Variable(torch.ones(2).type(torch.DoubleTensor), requires_grad=True)",
]


@pytest.mark.parametrize("call", EQUIVALENT_ON_CPU)
def test_tl301_safe_fixes_build_the_same_tensor(call):
    text = ("import torch\nimport torch.nn as nn\nfrom torch.autograd import Variable\n"
            "x = torch.ones(3)\nw = nn.Parameter(torch.ones(3))\nt = %s\n" % call)
    fix = preferred(only(text, "TL301"))
    assert fix.is_safe
    old, new = run(text)["t"], run(fixed(text, fix))["t"]
    import torch
    assert (new.dtype, new.shape, new.requires_grad, new.is_leaf) == \
        (old.dtype, old.shape, old.requires_grad, old.is_leaf)
    assert torch.equal(new.detach(), old.detach())


@pytest.mark.parametrize("call", ["torch.FloatTensor()", "torch.DoubleTensor(2, 3)", "torch.Tensor(4)",
                                  "torch.ByteTensor(torch.ones(2, 5).size())", "torch.HalfTensor(len([1, 2]))"])
def test_tl301_size_fixes_build_the_same_shape_and_dtype(call):
    text = "import torch\nt = %s\n" % call
    fix = preferred(only(text, "TL301"))
    old, new = run(text)["t"], run(fixed(text, fix))["t"]
    assert (new.dtype, new.shape, new.device) == (old.dtype, old.shape, old.device)
