"""TL202 stale-optimizer: exact fix outputs, the look-alikes that stay quiet, and fixed code run
with torch."""
from __future__ import annotations

import textwrap

import pytest

from torchlint.analysis.findings import Severity
from testkit.rules import by_title, findings, fixed, only, preferred, quiet, run


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
