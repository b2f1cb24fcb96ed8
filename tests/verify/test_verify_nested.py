"""Nested classes built and fed from their parents (issue #44): a class of the file that cannot
be built on its own (its arguments come from the parent's) or whose inputs cannot be guessed is
verified on the instance a parent of the same file built, with the exact arguments the
parent's forward called it with. A class nobody builds stays "needs arguments", never a
finding. One child process for the file.
"""
from __future__ import annotations

import pytest

from torchlint.verify import verify_file
from torchlint.verify.report import COMPLETED, render_text

from verify_helpers import check, class_report, issues, line_of, torch_python, write_module

# The children's arguments come from the parent's, through a list and a loop: no call site
# gives them, and Merge's forward takes two tensors and a keyword nobody could guess.
MODELS = '''
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F


class TwoConvs(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.first = nn.Conv2d(cin, cout, 3, padding=1)
        self.second = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x):
        return F.relu(self.second(F.relu(self.first(x))))


class Descend(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.convs = TwoConvs(cin, cout)

    def forward(self, x):
        return self.convs(F.max_pool2d(x, 2))


class Merge(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.lift = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.convs = TwoConvs(2 * cout, cout)
        self.gain = torch.ones(1, cout, 1, 1)

    def forward(self, low, skip, *, weight):
        x = torch.cat([skip, self.lift(low)], dim=1)
        return self.convs(x) * self.gain * weight


class Lonely(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.fc = nn.Linear(spec["width"], spec["width"])

    def forward(self, x):
        return self.fc(x)


class Masked(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x) * self.mask


class Gated(nn.Module):
    """Hands its child a mask as an attribute before each call: the child's input, not its state."""

    def __init__(self, width=6):
        super().__init__()
        self.inner = Masked(width)

    def forward(self, x):
        self.inner.mask = (x > 0).float()
        return self.inner(x)


class Locked(nn.Module):
    """Cannot be deep-copied (a lock): never fed, and its parent's run is not disturbed."""

    def __init__(self, spec):
        super().__init__()
        self.fc = nn.Linear(spec["width"], spec["width"])
        self.lock = threading.Lock()

    def forward(self, x):
        return self.fc(x)


class HoldsLocked(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.inner = [Locked({"width": size}) for size in (width,)][0]

    def forward(self, x):
        return self.inner(x)


class Refine(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, flow):
        return flow + self.conv(flow)


class FlowEstimator(nn.Module):
    """RAFT-like: the flow starts at zero, so the first call its child gets is all zeros."""

    def __init__(self, channels=2):
        super().__init__()
        self.refine = [Refine(size) for size in (channels,)][0]

    def forward(self, image):
        flow = self.refine(torch.zeros(image.shape[0], 2, image.shape[2], image.shape[3]))
        return self.refine(flow + image[:, :2])


class LittleUNet(nn.Module):
    def __init__(self, channels=3, classes=2, base=4, depth=2):
        super().__init__()
        widths = [base * 2 ** level for level in range(depth + 1)]
        self.stem = TwoConvs(channels, widths[0])
        self.downs = nn.ModuleList(Descend(a, b) for a, b in zip(widths, widths[1:]))
        self.ups = nn.ModuleList(Merge(b, a) for a, b in reversed(list(zip(widths, widths[1:]))))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, image):
        skips = [self.stem(image)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop(), weight=0.5)
        return self.head(x)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("nested"), "unet.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


@pytest.mark.parametrize("name, path, inputs", [
    ("TwoConvs", "stem", "(2, 3, 64, 64) float32 (from LittleUNet.forward, its call of stem)"),
    ("Descend", "downs.0", "(2, 4, 64, 64) float32 (from LittleUNet.forward, its call of downs.0)"),
    ("Merge", "ups.0", "(2, 16, 16, 16) float32, (2, 8, 32, 32) float32, weight=float "
                       "(from LittleUNet.forward, its call of ups.0)"),
])
def test_children_that_need_arguments_are_built_and_fed_by_their_parent(report, name, path, inputs):
    cls = class_report(report, name)
    assert cls.built_by == "LittleUNet"
    assert cls.constructed_with == {"origin": "LittleUNet.forward", "text": "LittleUNet().%s" % path}
    assert cls.inputs == inputs
    assert check(cls, "TL903").status == "passed" and check(cls, "TL904").status == "passed"
    assert cls.status == "verified", cls


def test_a_planted_bug_in_a_child_is_confirmed_on_its_line_through_the_parent(report, models):
    line = line_of(models, "self.gain = torch.ones(1, cout, 1, 1)")
    (tl901,) = issues(report, "TL901", "Merge")
    (tl902,) = issues(report, "TL902", "Merge")
    assert tl901.line == line and tl902.line == line
    assert tl901.attribute == "gain" and tl902.attribute == "gain"
    # Nothing else in the children: the clean ones have no finding at all.
    assert issues(report, verified="TwoConvs") == [] and issues(report, verified="Descend") == []
    assert sorted(i.code for i in issues(report, verified="Merge")) == ["TL901", "TL902"]


def test_a_class_nobody_builds_still_needs_arguments_and_gets_no_finding(report):
    cls = class_report(report, "Lonely")
    assert cls.status == "skipped" and cls.issues == [] and cls.built_by is None
    assert cls.skip_reason.startswith("needs arguments (spec):"), cls.skip_reason


def test_a_tensor_the_parent_stores_on_the_child_before_the_call_is_no_finding(report):
    cls = class_report(report, "Masked")
    assert cls.built_by == "Gated" and cls.status == "verified", cls
    assert cls.issues == [] and check(cls, "TL903").status == "passed"
    assert issues(report, verified="Gated") == []


def test_one_class_asked_for_is_fed_by_a_parent_the_run_does_not_report(models):
    # FILE::Class (the editor's lens): the other classes are built and run only to feed it.
    result = verify_file(str(models), class_name="Merge", python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    assert [cls.name for cls in result.classes] == ["Merge"]
    cls = result.classes[0]
    assert cls.built_by == "LittleUNet" and check(cls, "TL903").status == "passed"
    line = line_of(models, "self.gain = torch.ones(1, cout, 1, 1)")
    assert sorted((i.code, i.line) for i in result.issues) == [("TL901", line), ("TL902", line)]


def test_one_class_nobody_holds_still_needs_arguments(models):
    result = verify_file(str(models), class_name="Lonely", python=torch_python(), timeout=300)
    (cls,) = result.classes
    assert cls.status == "skipped" and cls.skip_reason.startswith("needs arguments (spec):") and not result.issues


# A seq2seq: the decoder is called once per step with a hidden state and a keyword argument,
# the attention inside it with tensors only the encoder's outputs give.
SEQ2SEQ = '''
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, tokens):
        return self.rnn(self.embed(tokens))


class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.score = nn.Linear(2 * hidden, 1)

    def forward(self, query, keys):
        q = query.expand(-1, keys.shape[1], -1)
        weights = torch.softmax(self.score(torch.cat([q, keys], -1)), dim=1)
        return (weights * keys).sum(1, keepdim=True)


class Decoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.attend = Attention(hidden)
        self.rnn = nn.GRU(2 * hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, token, state, memory):
        x = self.embed(token)
        context = self.attend(state.transpose(0, 1), memory)
        y, state = self.rnn(torch.cat([x, context], -1), state)
        return self.out(y), state


class Seq2Seq(nn.Module):
    def __init__(self, vocab=50, hidden=16):
        super().__init__()
        self.encoder = Encoder(vocab, hidden)
        self.decoder = Decoder(vocab, hidden)

    def forward(self, source, target):
        memory, state = self.encoder(source)
        logits = []
        for step in range(target.shape[1]):
            out, state = self.decoder(target[:, step:step + 1], state, memory=memory)
            logits.append(out)
        return torch.cat(logits, 1)


def example_inputs(module):
    if isinstance(module, Seq2Seq):
        return torch.randint(0, 50, (2, 7)), torch.randint(0, 50, (2, 5))
    return None
'''


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("seq2seq"), "seq.py", SEQ2SEQ)
    result = verify_file(str(path), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


def test_a_decoder_gets_the_keyword_arguments_its_parent_called_it_with(seq2seq):
    cls = class_report(seq2seq, "Decoder")
    assert cls.inputs == "(2, 1) int64, (1, 2, 16) float32, memory=(2, 7, 16) float32 (seen when Seq2Seq.forward called it)"
    assert cls.status == "verified" and check(cls, "TL903").status == "passed", cls


def test_a_grandchild_is_fed_through_its_grandparent(seq2seq):
    cls = class_report(seq2seq, "Attention")
    assert cls.built_by == "Seq2Seq" and cls.constructed_with["text"] == "Seq2Seq().decoder.attend"
    assert cls.inputs == "(2, 1, 16) float32, (2, 7, 16) float32 (from Seq2Seq.forward, its call of decoder.attend)"
    assert cls.status == "verified" and cls.issues == [] and check(cls, "TL904").status == "passed"
    assert seq2seq.issues == []


def test_a_child_that_cannot_be_copied_is_not_fed_and_its_parent_runs_as_before(report):
    cls = class_report(report, "Locked")
    assert cls.status == "skipped" and cls.skip_reason.startswith("needs arguments (spec):") and not cls.issues
    parent = class_report(report, "HoldsLocked")
    assert parent.status == "verified" and parent.issues == [] and check(parent, "TL903").status == "passed"


def test_constant_inputs_a_parent_gives_are_replaced_by_random_values_of_their_shape(report):
    cls = class_report(report, "Refine")
    assert cls.built_by == "FlowEstimator" and cls.issues == [], cls.issues
    assert cls.inputs.endswith("(from FlowEstimator.forward, its call of refine; constant float inputs given "
                               "random values)"), cls.inputs


def test_the_text_report_says_where_the_instance_came_from(report, models):
    text = render_text(report, "unet.py")
    assert "Descend: verified with inputs (2, 4, 64, 64) float32 (from LittleUNet.forward, its call of downs.0)\n" \
           "  built by LittleUNet, fed from its forward (LittleUNet().downs.0)\n" in text


def test_a_class_whose_nn_comes_through_a_star_import_is_built_from_a_call_site(tmp_path):
    # A U-Net's layout: model.py takes nn from `from .parts import *`, so the file alone cannot
    # show UNet is a Module; a test's literal call builds it all the same.
    package = tmp_path / "seg"
    package.mkdir()
    write_module(package, "__init__.py", "")
    write_module(package, "parts.py", '''
        import torch.nn as nn


        class Stage(nn.Module):
            def __init__(self, cin, cout):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3, padding=1)

            def forward(self, x):
                return self.conv(x)
    ''')
    model = write_module(package, "model.py", '''
        from .parts import *


        class Segmenter(nn.Module):
            def __init__(self, channels, classes):
                super().__init__()
                self.stage = Stage(channels, 8)
                self.head = nn.Conv2d(8, classes, 1)

            def forward(self, x):
                return self.head(self.stage(x))
    ''')
    (tmp_path / "tests").mkdir()
    write_module(tmp_path / "tests", "test_model.py", '''
        from seg.model import Segmenter

        net = Segmenter(3, 2)
    ''')
    result = verify_file(str(model), python=torch_python(), timeout=300, workspace_root=str(tmp_path))
    cls = class_report(result, "Segmenter")
    assert cls.status == "verified" and cls.constructed_with["text"] == "Segmenter(3, 2)", cls
    assert check(cls, "TL903").status == "passed" and not result.issues
