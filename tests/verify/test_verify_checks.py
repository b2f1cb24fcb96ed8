"""TL901-TL905 on real modules, each file run once in one child process.

The first group pins ``device="cpu"``: it is about the CPU run, where TL902 uses
``.to(torch.float64)`` as the observable stand-in for a device move. The CUDA group
runs only where torch sees a GPU; ``device="auto"`` is checked on either kind of machine.
"""
from __future__ import annotations

import pytest

from torchlint.analysis.findings import Severity
from torchlint.verify import report_to_findings, verify_file
from torchlint.verify.report import COMPLETED, summary_line

from verify_helpers import ROOT, check, class_report, cuda_available, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class RawGamma(nn.Module):
    """The first seed article's gamma_1 with requires_grad, minus CUDA."""

    def __init__(self, dim=5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma_1 = torch.tensor([1.0]).requires_grad_(True)

    def forward(self, x):
        return self.fc(x) * self.gamma_1


class ParameterGamma(nn.Module):
    """The seed's correct version."""

    def __init__(self, dim=5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma_1 = nn.Parameter(torch.tensor([1.0]))

    def forward(self, x):
        return self.fc(x) * self.gamma_1


class ListOfLayers(nn.Module):
    def __init__(self, dim=8, depth=3):
        super().__init__()
        self.layers = [nn.Linear(dim, dim) for _ in range(depth)]
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


class MovedParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4)).to(torch.float64)
        self.proj = nn.Linear(4, 4).double()

    def forward(self, x):
        return self.proj(x.double()) * self.scale


class IncorrectLinear(nn.Module):
    """The third seed article: weights stored as plain tensors."""

    def __init__(self, in_features=10, out_features=2):
        super().__init__()
        self.weight = torch.randn(out_features, in_features)
        self.bias = torch.randn(out_features)

    def forward(self, x):
        return torch.matmul(x, self.weight.T) + self.bias

    def torchlint_example_inputs(self):
        return torch.randn(1, 10)


class MaskNotBuffer(nn.Module):
    def __init__(self, size=6):
        super().__init__()
        self.fc = nn.Linear(size, size)
        self.register_buffer("causal", torch.tril(torch.ones(size, size)))
        self.mask = torch.tril(torch.ones(size, size))

    def forward(self, x):
        return self.fc(x) @ (self.mask * self.causal)


class Clean(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.register_buffer("scale", torch.ones(dim))
        self.first = [self.blocks[0]]  # an alias of a registered module: nothing is lost
        self.temperature = 0.5
        self.shape = [2, dim]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * self.scale * self.temperature


class UnusedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux_head = nn.Linear(4, 2)

    def forward(self, x):
        return self.body(x)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = RawGamma(5)
        self.out = nn.Linear(5, 1)

    def forward(self, x):
        return self.out(self.inner(x))


class NoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(2.0))  # (a (3, 3) one would say a width to guess)

    def forward(self, x):
        return x * self.weight


class GuessedWrong(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x.view(-1, 7))


class NeedsArguments(nn.Module):
    def __init__(self, dim, heads: "HeadCount"):  # (an annotation that says nothing: no argument made up)
        super().__init__()
        self.heads = [nn.Linear(dim, dim) for _ in range(heads)]

    def forward(self, x):
        return sum(head(x) for head in self.heads)


class NotAModule:
    def __init__(self):
        self.table = torch.zeros(3)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("verify"), "models.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    # The CPU run, named: its expectations are the float64 stand-in's; auto and CUDA are tested below.
    result = verify_file(str(models), python=torch_python(), timeout=300, device="cpu")
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


@pytest.fixture(scope="module")
def findings(report, models):
    return report_to_findings(report, models.read_text(), str(models))


def codes(report, name):
    return sorted({i.code for i in issues(report, verified=name)})


def test_runs_on_the_cpu_and_says_so(report):
    assert report.device == "cpu" and report.device_name is None
    assert "float64" in report.device_note
    assert report.torch_version


def test_every_module_class_of_the_file_is_verified_in_order(report):
    assert [c.name for c in report.classes] == [
        "RawGamma", "ParameterGamma", "ListOfLayers", "MovedParameter", "IncorrectLinear", "MaskNotBuffer",
        "Clean", "UnusedHead", "Nested", "NoInputs", "GuessedWrong", "NeedsArguments"]


def test_gamma_as_raw_tensor_gets_a_gradient_the_optimizer_never_sees(report, models, findings):
    assert codes(report, "RawGamma") == ["TL901", "TL902", "TL903", "TL904"]
    (tl903,) = issues(report, "TL903", "RawGamma")
    assert tl903.attribute == "gamma_1" and tl903.severity == "error"
    assert "received a gradient" in tl903.message and "not in parameters()" in tl903.message
    (tl904,) = issues(report, "TL904", "RawGamma")
    assert "did not change" in tl904.message
    line = line_of(models, "self.gamma_1 = torch.tensor")
    placed = {(f.code, f.range.start.line) for f in findings if "gamma_1" in f.message and "inner" not in f.message}
    assert placed >= {("TL901", line), ("TL902", line), ("TL903", line), ("TL904", line)}


def test_registered_parameter_is_clean(report):
    cls = class_report(report, "ParameterGamma")
    assert cls.issues == [] and cls.status == "verified"
    assert [c.status for c in cls.checks] == ["passed"] * 6


def test_plain_list_of_layers(report, models, findings):
    assert codes(report, "ListOfLayers") == ["TL901", "TL902", "TL903", "TL904", "TL907"]
    (tl901,) = issues(report, "TL901", "ListOfLayers")
    assert tl901.attribute == "layers" and "3 modules" in tl901.message
    (tl904,) = issues(report, "TL904", "ListOfLayers")
    assert "layers[0].weight" in tl904.message  # the optimizer step left the hidden weights alone
    assert "layers[2].bias" in " ".join(tl904.paths)
    line = line_of(models, "self.layers = [")
    assert {f.range.start.line for f in findings if "layers" in f.message} == {line}


def test_parameter_moved_after_wrapping_is_not_registered(report, models):
    assert codes(report, "MovedParameter") == ["TL901", "TL903", "TL904"]
    (tl901,) = issues(report, "TL901", "MovedParameter")
    assert tl901.attribute == "scale" and "a tensor (float64" in tl901.message


def test_seed_incorrect_linear_holds_plain_tensors(report):
    cls = class_report(report, "IncorrectLinear")
    assert cls.inputs.endswith("(from IncorrectLinear.torchlint_example_inputs)")
    assert sorted(i.attribute for i in issues(report, "TL901", "IncorrectLinear")) == ["bias", "weight"]
    assert all(i.severity == "warning" for i in issues(report, "TL901", "IncorrectLinear"))
    assert sorted(i.attribute for i in issues(report, "TL902", "IncorrectLinear")) == ["bias", "weight"]
    assert check(cls, "TL903").status == "passed"  # nothing trainable: nothing to miss


def test_mask_that_is_not_a_buffer_is_left_behind_by_the_move(report):
    (tl902,) = issues(report, "TL902", "MaskNotBuffer")
    assert tl902.attribute == "mask" and "still float32" in tl902.message
    assert [i.attribute for i in issues(report, "TL901", "MaskNotBuffer")] == ["mask"]


def test_clean_module_has_no_findings(report):
    cls = class_report(report, "Clean")
    assert cls.issues == [] and [c.status for c in cls.checks] == ["passed"] * 6
    assert "guessed from blocks.0 = Linear(in_features=6)" in cls.inputs


def test_submodule_never_called_is_information_not_a_broken_parameter(report, models, findings):
    (tl903,) = issues(report, "TL903", "UnusedHead")
    assert tl903.severity == "info" and tl903.paths == ["aux_head"]
    assert "never used in forward" in tl903.message and "find_unused_parameters=True" in tl903.message
    assert issues(report, "TL904", "UnusedHead") == []
    line = line_of(models, "self.aux_head =")
    assert [(f.code, f.severity) for f in findings if f.range.start.line == line] == [("TL903", Severity.INFO)]
    assert check(class_report(report, "UnusedHead"), "TL903").status == "passed"


def test_bug_in_a_submodule_lands_on_the_submodule_class(report, models):
    nested = issues(report, verified="Nested")
    assert {i.code for i in nested} == {"TL901", "TL902", "TL903", "TL904"}
    line = line_of(models, "self.gamma_1 = torch.tensor")
    for issue in nested:
        assert (issue.class_name, issue.owner_class, issue.attribute) == ("Nested", "RawGamma", "inner.gamma_1")
        assert issue.paths == ["inner.gamma_1"] and issue.line == line


def test_checks_needing_inputs_are_skipped_with_a_reason(report):
    cls = class_report(report, "NoInputs")
    assert check(cls, "TL901").status == "passed"
    assert check(cls, "TL902").status == "passed"
    for code in ("TL903", "TL904"):
        assert check(cls, code).status == "skipped"
        assert "--input-shape" in check(cls, code).summary


def test_guessed_inputs_that_do_not_fit_skip_instead_of_blaming_the_module(report):
    cls = class_report(report, "GuessedWrong")
    assert cls.issues == []
    assert check(cls, "TL903").status == "skipped" and "did not fit" in check(cls, "TL903").summary


def test_class_needing_arguments_is_skipped(report):
    cls = class_report(report, "NeedsArguments")
    assert cls.status == "skipped"
    assert "dim" in cls.skip_reason and "--init-kwargs" in cls.skip_reason


def test_init_kwargs_and_input_shapes(models):
    result = verify_file(str(models), class_name="NeedsArguments", init_kwargs='{"dim": 8, "heads": 2}',
                         input_shapes="2,8", python=torch_python(), device="cpu", timeout=300)
    assert [c.name for c in result.classes] == ["NeedsArguments"]
    cls = result.classes[0]
    assert cls.inputs == "(2, 8) float32 (from --input-shape)"
    assert {i.code for i in cls.issues} == {"TL901", "TL902", "TL903", "TL904", "TL907"}
    assert all(i.attribute.startswith("heads") for i in cls.issues)
    assert {i.line for i in cls.issues} == {line_of(models, "self.heads = [")}
    assert cls.constructed_with == {"origin": "--init-kwargs", "text": "NeedsArguments(dim=8, heads=2)"}


def test_findings_come_from_torchlint_verify(findings):
    assert findings and all(f.source == "torchlint-verify" for f in findings)
    assert findings == sorted(findings, key=lambda f: (f.range.start, f.code))


# -- gradient checks that do not cry wolf ---------------------------------------------------------

GRADIENTS = '''
import torch
import torch.nn as nn


class EndsInLayerNorm(nn.Module):
    """The sum of a LayerNorm's outputs is constant: a sum loss would give every weight a zero gradient."""

    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def forward(self, x):
        return self.norm(self.fc(x))


class ZeroGatesInSeries(nn.Module):
    """A ReZero gate behind a zero-initialised head: each opens one optimizer step after the other."""

    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.alpha = nn.Parameter(torch.zeros(1))
        self.head = nn.Linear(dim, 4)
        nn.init.zeros_(self.head.weight)

    def forward(self, x):
        return self.head(x + self.alpha * torch.relu(self.fc(x)))


class FrozenAndNoGrad(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.frozen = nn.Linear(dim, dim).requires_grad_(False)
        self.reference_scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        with torch.no_grad():
            reference = x * self.reference_scale
        return self.fc(self.frozen(x)) + reference


class UnusedHeads(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.body = nn.Linear(dim, dim)
        self.heads = nn.ModuleList([nn.Linear(dim, 2), nn.Linear(dim, 3)])

    def forward(self, x):
        return self.body(x)


class Expert(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, tokens):
        if tokens.shape[0] == 0:
            return tokens  # no tokens: the layers inside never run
        return self.fc(tokens)


class ShortcutExperts(nn.Module):
    """Top-1 routing over many experts: a batch of 2 tokens leaves most of them empty."""

    def __init__(self, dim=8, count=6):
        super().__init__()
        self.router = nn.Linear(dim, count)
        self.experts = nn.ModuleList([Expert(dim) for _ in range(count)])

    def forward(self, x):
        gate, index = self.router(x).softmax(-1).max(-1)
        return torch.stack([self.experts[i](row[None])[0] * g for row, i, g in zip(x, index.tolist(), gate)]
                           + [expert(x[:0]).sum(0) for expert in self.experts])[: len(x)]


class MultipliedByZero(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.offset = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.fc(x) + 0.0 * self.offset


class UnusedParameter(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.extra = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def gradients(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("gradients"), "gradients.py", GRADIENTS)
    result = verify_file(str(path), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return path, result


@pytest.mark.parametrize("name", ["EndsInLayerNorm", "ZeroGatesInSeries", "FrozenAndNoGrad"])
def test_healthy_gradients_are_not_reported(gradients, name):
    _, report = gradients
    cls = class_report(report, name)
    assert cls.issues == [] and [c.status for c in cls.checks] == ["passed"] * 6, cls.checks


def test_zero_gates_in_series_get_the_steps_they_need(gradients):
    _, report = gradients
    summary = check(class_report(report, "ZeroGatesInSeries"), "TL904").summary
    assert summary.startswith("3 steps") and "5 of 5 trainable parameters got a nonzero gradient" in summary


def test_frozen_and_no_grad_parameters_are_counted_not_reported(gradients):
    _, report = gradients
    cls = class_report(report, "FrozenAndNoGrad")
    assert "2 frozen (requires_grad=False)" in check(cls, "TL903").summary
    assert "1 used only under no_grad" in check(cls, "TL904").summary


def test_an_unused_container_is_one_information(gradients):
    path, report = gradients
    (issue,) = issues(report, verified="UnusedHeads")
    assert issue.code == "TL903" and issue.severity == "info" and issue.paths == ["heads"]
    assert issue.line == line_of(path, "self.heads =")


def test_experts_that_got_an_empty_batch_are_information(gradients):
    _, report = gradients
    found = issues(report, verified="ShortcutExperts")
    assert found and all((i.code, i.severity) == ("TL904", "info") and "no tokens" in i.message for i in found)
    assert all(p.startswith("experts.") and p.count(".") == 1 for i in found for p in i.paths)


def test_a_gradient_that_is_zero_on_every_step(gradients):
    path, report = gradients
    (issue,) = issues(report, verified="MultipliedByZero")
    assert (issue.code, issue.severity, issue.attribute) == ("TL904", "warning", "offset")
    assert "all-zero gradient" in issue.message and issue.line == line_of(path, "self.offset =")


def test_a_parameter_forward_never_uses(gradients):
    path, report = gradients
    (issue,) = issues(report, verified="UnusedParameter")
    assert (issue.code, issue.severity, issue.attribute) == ("TL904", "warning", "extra")
    assert "no gradient" in issue.message and issue.line == line_of(path, "self.extra =")


# -- any BaseException from user code is a TL905 -------------------------------------------------

HOSTILE = '''
import torch
import torch.nn as nn


class Unprintable(Exception):
    def __str__(self):
        raise ValueError("no str")

    def __repr__(self):
        raise ValueError("no repr")


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def torchlint_example_inputs(self):
        return torch.randn(2, 4)


class Recurses(Layer):
    def forward(self, x):
        return self(x)


class ReadsStdin(nn.Module):
    def __init__(self):
        super().__init__()
        self.name = input("name? ")


class Interrupted(Layer):
    def forward(self, x):
        raise KeyboardInterrupt


class ExitsInForward(Layer):
    def forward(self, x):
        raise SystemExit("bye")


class ClosesGenerator(Layer):
    def forward(self, x):
        raise GeneratorExit


class RaisesUnprintable(Layer):
    def forward(self, x):
        raise Unprintable()


class GuessedInterrupt(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        raise KeyboardInterrupt("guessed")


class StillFine(Layer):
    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("hostile"), "hostile.py", HOSTILE)
    result = verify_file(str(path), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return path, result


@pytest.mark.parametrize("name, needle, words", [
    ("Recurses", "return self(x)", "RecursionError"),
    ("ReadsStdin", 'input("name? ")', "EOFError"),
    ("Interrupted", "raise KeyboardInterrupt", "KeyboardInterrupt"),
    ("ExitsInForward", 'raise SystemExit("bye")', "sys.exit(bye)"),
    ("ClosesGenerator", "raise GeneratorExit", "GeneratorExit"),
    ("RaisesUnprintable", "raise Unprintable()", "Unprintable: <Unprintable object that cannot be printed>"),
    # Guessed inputs: an interrupt is still the module's doing, not inputs that do not fit.
    ("GuessedInterrupt", 'raise KeyboardInterrupt("guessed")', "KeyboardInterrupt"),
])
def test_base_exceptions_become_tl905_with_their_line(hostile, name, needle, words):
    path, report = hostile
    cls = class_report(report, name)
    (issue,) = cls.issues
    assert cls.status == "failed" and issue.code == "TL905" and issue.severity == "error"
    assert words in issue.message and issue.line == line_of(path, needle)


def test_the_run_goes_on_after_hostile_classes(hostile):
    _, report = hostile
    assert class_report(report, "StillFine").status == "verified"
    assert "No problems" not in summary_line(report)


# -- the device: auto, and CUDA where there is one ------------------------------------------------

def test_auto_picks_cuda_when_there_is_one_and_says_so(report, models):
    result = verify_file(str(models), class_name="ParameterGamma", python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    if cuda_available():
        assert result.device.startswith("cuda") and result.device_name
    else:
        assert result.device == "cpu" and "float64" in result.device_note
    assert class_report(result, "ParameterGamma").issues == []


@pytest.fixture(scope="module")
def cuda_report(models):
    if not cuda_available():
        pytest.skip("CUDA-only behaviour: torch.cuda.is_available() is False here")
    result = verify_file(str(models), python=torch_python(), timeout=300, device="cuda")
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


def test_cuda_run_names_the_gpu(cuda_report):
    assert cuda_report.device.startswith("cuda:") and cuda_report.device_name
    assert cuda_report.device_note == ""


def test_cuda_tensor_left_behind_is_reported_then_moved_so_gradients_are_checked(cuda_report, models):
    assert codes(cuda_report, "RawGamma") == ["TL901", "TL902", "TL903", "TL904"]
    (tl902,) = issues(cuda_report, "TL902", "RawGamma")
    assert "left behind by model.to(cuda" in tl902.message and "still on cpu" in tl902.message
    (tl903,) = issues(cuda_report, "TL903", "RawGamma")
    assert "received a gradient" in tl903.message and tl903.line == line_of(models, "self.gamma_1 = torch.tensor")
    cls = class_report(cuda_report, "RawGamma")
    assert cls.status == "verified" and "moved" in check(cls, "TL902").summary


def test_cuda_plain_list_of_layers(cuda_report):
    assert codes(cuda_report, "ListOfLayers") == ["TL901", "TL902", "TL903", "TL904"]
    assert class_report(cuda_report, "Clean").issues == []
    assert class_report(cuda_report, "ParameterGamma").issues == []


SEED_ON_CUDA = '''
import torch
import torch.nn as nn


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma_1 = torch.cuda.FloatTensor([1.0]).requires_grad_(True)

    def forward(self, x):
        return x * self.gamma_1
'''


def test_cuda_seed_gamma_receives_a_gradient_the_optimizer_never_applies(tmp_path):
    if not cuda_available():
        pytest.skip("CUDA-only behaviour: the seed builds its tensor with torch.cuda.FloatTensor")
    path = write_module(tmp_path, "seed.py", SEED_ON_CUDA)
    result = verify_file(str(path), python=torch_python(), timeout=300, device="cuda", input_shapes="10,5")
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    assert codes(result, "MyModule") == ["TL901", "TL903", "TL904"]
    assert all(i.line == line_of(path, "self.gamma_1 =") for i in result.issues)


# -- the request, as the parent writes it: constructors, factories, --input expressions -----------

BUILDERS = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


class FromCallSites(Net):
    pass


class FromFactory(Net):
    pass


class FromDictFactory(Net):
    pass


class BrokenConfiguredFactory(Net):
    pass


class NothingFits(Net):
    def __init__(self, width, act):  # (a name that says nothing: no argument made up)
        super().__init__(width)


class DefaultsFirst(Net):
    def __init__(self, width=3):
        super().__init__(width)


WIDTH = 7


def build_with_inputs():
    return FromFactory(6), torch.randn(3, 6)


def build_as_dict():
    return {"model": FromDictFactory(5), "inputs": (torch.randn(2, 5),)}


def broken_factory():
    raise RuntimeError("no weights here")
'''


def run_probe(folder, **request):
    """The probe run by path on a request written here (what runner.verify_file sends)."""
    import json
    import subprocess
    import time

    from torchlint.verify.runner import PROBE

    full = {"class_name": None, "device": "cpu", "init_kwargs": None, "input_shapes": None,
            "deadline": time.time() + 300, "result_path": str(folder / "result.json"),
            "stack_path": str(folder / "stack.txt")}
    full.update(request)
    (folder / "request.json").write_text(json.dumps(full))
    done = subprocess.run([torch_python(), str(PROBE), str(folder / "request.json")], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    result = json.loads((folder / "result.json").read_text())
    assert done.returncode == 0 and result["finished"], done.stderr
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("builders")
    path = write_module(folder, "builders.py", BUILDERS)
    constructors = {
        "FromCallSites": [
            {"expression": "FromCallSites(width=undefined_name)", "origin": "a.py:1, a call site"},
            {"expression": "len([1, 2])", "origin": "b.py:2, a call site"},
            {"expression": "FromCallSites(WIDTH)", "origin": "c.py:3, a call site"},
            {"expression": "FromCallSites(1)", "origin": "d.py:4, never reached"},
        ],
        "FromFactory": [{"factory": "builders:build_with_inputs", "origin": "[tool.torchlint.verify]",
                         "before_defaults": True}],
        "FromDictFactory": [{"factory": "builders:build_as_dict", "origin": "e.py:5, factory"}],
        "BrokenConfiguredFactory": [{"factory": "builders:broken_factory", "origin": "[tool.torchlint.verify]",
                                     "before_defaults": True}],
        "NothingFits": [{"expression": "NothingFits(nope)", "origin": "f.py:6, a call site"}],
        "DefaultsFirst": [{"expression": "DefaultsFirst(9)", "origin": "g.py:7, a call site"}],
    }
    result = run_probe(folder, path=str(path), constructors=constructors,
                       **{"import": {"root": str(folder), "module": "builders"}, "extra_paths": [str(folder)]})
    return path, result, {c["name"]: c for c in result["classes"]}


def test_package_import_is_used_when_asked(built):
    _, result, _ = built
    assert result["imported_as"] == "builders" and result["file_issues"] == []


def test_call_sites_are_tried_in_order_until_one_builds_the_class(built):
    _, _, classes = built
    cls = classes["FromCallSites"]
    assert cls["status"] == "verified" and cls["issues"] == []
    assert cls["constructed_with"] == {"origin": "c.py:3, a call site", "text": "FromCallSites(WIDTH)"}
    assert cls["inputs"].startswith("(2, 7) float32")


def test_a_factory_may_return_example_inputs(built):
    _, _, classes = built
    assert classes["FromFactory"]["constructed_with"] == {"origin": "[tool.torchlint.verify]",
                                                          "text": "builders:build_with_inputs"}
    assert classes["FromFactory"]["inputs"] == "(3, 6) float32 (from builders:build_with_inputs)"
    assert classes["FromDictFactory"]["inputs"] == "(2, 5) float32 (from builders:build_as_dict)"


def test_a_configured_factory_that_fails_is_the_user_s_failure(built):
    path, _, classes = built
    cls = classes["BrokenConfiguredFactory"]
    (issue,) = cls["issues"]
    assert cls["status"] == "failed" and issue["code"] == "TL905"
    assert "builders:broken_factory" in issue["message"] and "RuntimeError: no weights here" in issue["message"]
    assert issue["line"] == line_of(path, 'raise RuntimeError("no weights here")')


def test_when_nothing_builds_the_class_the_skip_says_both_ways(built):
    _, _, classes = built
    cls = classes["NothingFits"]
    assert cls["status"] == "skipped"
    reason = cls["skip_reason"]
    assert '"Verify" lens' in reason and "--init-kwargs '{\"width\": ..., \"act\": ...}'" in reason
    assert "[tool.torchlint.verify.classes.NothingFits]" in reason and "NothingFits(nope) (f.py:6, a call site) failed" in reason


def test_defaults_come_before_call_sites(built):
    _, _, classes = built
    assert classes["DefaultsFirst"]["constructed_with"] == {"origin": "defaults", "text": "DefaultsFirst()"}


def test_every_issue_names_the_verified_class_and_the_owner(built):
    _, result, _ = built
    for cls in result["classes"]:
        for issue in cls["issues"]:
            assert issue["class"] == cls["name"] and issue["line"]
            assert {"attribute", "owner_class", "owner_file"} <= set(issue)


def test_input_expressions_are_evaluated_in_the_module(tmp_path):
    path = write_module(tmp_path, "builders.py", BUILDERS)
    result = run_probe(tmp_path, path=str(path), class_name="FromCallSites", init_kwargs={"width": 4},
                       input_exprs=["torch.ones(2, WIDTH - 3)"])
    (cls,) = result["classes"]
    assert cls["constructed_with"] == {"origin": "--init-kwargs", "text": "FromCallSites(width=4)"}
    assert cls["inputs"] == "(2, 4) float32 (from --input)" and cls["status"] == "verified"


# -- the layer-scale gamma_1 bug in the three versions of the article "Why can't I use a -----------
# torch.cuda.FloatTensor as the gamma_1 parameter?", rewritten in tests/fixtures/layer_scale_gamma

GAMMA_VERSIONS = ROOT / "tests" / "fixtures" / "layer_scale_gamma"


def gamma_reports(tmp_path, device):
    reports = []
    for name in ("plain_tensor.py", "requires_grad_tensor.py", "parameter.py"):
        path = write_module(tmp_path, name, (GAMMA_VERSIONS / name).read_text(encoding="utf-8"))
        report = verify_file(str(path), python=torch_python(), timeout=300, input_shapes="10,5", device=device)
        assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
        reports.append((path, report))
    return reports


def test_layer_scale_gamma_versions_on_the_cpu(tmp_path):
    for path, report in gamma_reports(tmp_path, "cpu"):
        # Each builds gamma_1 with torch.cuda.FloatTensor: the CPU cannot.
        (issue,) = report.issues
        assert issue.code == "TL905" and issue.line == line_of(path, "self.gamma_1 ="), issue


def test_layer_scale_gamma_versions_on_cuda(tmp_path):
    if not cuda_available():
        pytest.skip("CUDA-only behaviour: torch.cuda.FloatTensor needs a GPU (torch.cuda.is_available() is False)")
    for path, report in gamma_reports(tmp_path, "cuda"):
        line = line_of(path, "self.gamma_1 =")
        assert report.device.startswith("cuda")
        found = {(i.code, i.severity) for i in report.issues}
        assert all(i.line == line for i in report.issues)
        if path.name == "plain_tensor.py":  # no requires_grad: unregistered, never trained
            assert found == {("TL901", "warning")}
        elif path.name == "requires_grad_tensor.py":  # it gets a gradient the optimizer never applies
            assert found == {("TL901", "error"), ("TL903", "error"), ("TL904", "error")}
        else:  # nn.Parameter: the fix
            assert found == set()
