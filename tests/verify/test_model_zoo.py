"""Verification of a realistic model package (tests/verify/model_zoo), run as a new user would:
``verify_file`` on each file, no flags. The files import each other relatively, the package's
__init__ fills a registry, ResNet needs constructor arguments that only its factories say.

Healthy models: no TL905, no TL901-TL904 at error or warning level (a head the forward never
calls and experts that got no tokens are information). Each buggy twin: its finding.
The healthy models run on the default device: CUDA where there is one, else the CPU. The buggy
twins' expectations are the CPU run's (the float64 stand-in for the move); what the same bugs do
on CUDA is tested on its own, where there is a GPU.
"""
from __future__ import annotations

import pytest

from torchlint.verify import report_to_findings, verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import ROOT, check, class_report, cuda_available, issues, line_of, torch_python

ZOO = ROOT / "tests" / "verify" / "model_zoo"
FILES = ("resnet.py", "vit.py", "text.py", "moe.py", "distill.py", "seq.py", "heads.py", "video.py", "buggy.py")
HEALTHY = {
    "resnet.py": ["ResNet"],
    "vit.py": ["PatchEmbed", "VisionTransformer"],
    "text.py": ["TinyLM"],
    "moe.py": ["Top1MoE", "SparseMoEBlock"],
    "distill.py": ["Student", "Distiller"],
    "seq.py": ["MaskedEncoder", "ClsPool", "TokenBlock", "NarrowFirst"],
    "heads.py": ["DoubleScale", "LeafGate", "LazyHeadNet", "DecayedInPlace"],
    "video.py": ["ClipClassifier"],
}
EXPECTED_FAILURES = {"NonLeafGate"}  # its second training step fails: that is the bug it carries


@pytest.fixture(scope="module")
def reports():
    found = {}
    for name in FILES:
        device = "cpu" if name == "buggy.py" else "auto"
        report = verify_file(str(ZOO / name), python=torch_python(), timeout=300, device=device)
        assert report.outcome == COMPLETED, (name, report.error, report.stderr_tail)
        found[name] = report
    return found


def serious(report, verified):
    return [i for i in issues(report, verified=verified) if i.severity in ("error", "warning")]


def test_package_files_import_as_modules_of_the_package(reports):
    for name, report in reports.items():
        assert report.file_issues == [], (name, report.file_issues)
        failed = [i for i in report.issues if i.code == "TL905" and i.class_name not in EXPECTED_FAILURES]
        assert not failed, (name, [i.message for i in failed])


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_models_are_clean(reports, name):
    report = reports[name]
    for verified in HEALTHY[name]:
        cls = class_report(report, verified)
        assert cls.status == "verified", (verified, cls.skip_reason)
        assert serious(report, verified) == [], [i.message for i in serious(report, verified)]
        assert [c.status for c in cls.checks] == ["passed"] * 6, cls.checks


def test_resnet_needs_arguments_and_gets_them_from_its_factories(reports):
    report = reports["resnet.py"]
    cls = class_report(report, "ResNet")
    assert cls.constructed_with["text"] in (
        "resnet_tiny()", "resnet_cifar()", "ResNet(BasicBlock, [1, 1], num_classes=10)")
    assert "resnet.py" in cls.constructed_with["origin"]
    # The zero-initialised last BN gammas open on the second step: every parameter trains.
    summary = check(cls, "TL904").summary
    received, total = summary.split(" trainable parameters")[0].split(": ")[-1].split(" of ")
    assert received == total


def test_vision_transformer_zero_head_after_layernorm_is_healthy(reports):
    report = reports["vit.py"]
    cls = class_report(report, "VisionTransformer")
    assert "224, 224" in cls.inputs  # the 64-pixel guess does not fit its position embedding
    (unused,) = issues(report, verified="VisionTransformer")
    assert unused.code == "TL903" and unused.severity == "info" and unused.attribute == "head_dist"
    assert "never used in forward" in unused.message and "find_unused_parameters" in unused.message
    assert unused.line == line_of(ZOO / "vit.py", "self.head_dist =")


def test_experts_without_tokens_are_information(reports):
    report = reports["moe.py"]
    for verified in ("Top1MoE", "SparseMoEBlock"):
        found = issues(report, verified=verified)
        assert found and all(i.severity == "info" and i.code == "TL904" for i in found), found
        assert all("no tokens" in i.message for i in found)
        assert all(p.startswith("experts.") for i in found for p in i.paths)


def test_frozen_teacher_under_no_grad_is_healthy(reports):
    report = reports["distill.py"]
    cls = class_report(report, "Distiller")
    assert issues(report, verified="Distiller") == []
    assert "used only under no_grad" in check(cls, "TL904").summary
    assert "frozen" in check(cls, "TL903").summary


def test_rotary_caches_registered_non_persistent_are_clean(reports):
    assert issues(reports["text.py"], verified="TinyLM") == []


def codes(report, verified, severity=("error", "warning")):
    return sorted({i.code for i in issues(report, verified=verified) if i.severity in severity})


def test_buggy_gamma_as_plain_tensor(reports):
    report = reports["buggy.py"]
    assert codes(report, "PlainGammaBlock") == ["TL901", "TL902", "TL903", "TL904"]
    (tl903,) = issues(report, "TL903", "PlainGammaBlock")
    assert tl903.attribute == "gamma_1" and "received a gradient" in tl903.message
    assert tl903.line == line_of(ZOO / "buggy.py", "self.gamma_1 = torch.full")


def test_buggy_plain_list_of_layers(reports):
    report = reports["buggy.py"]
    # (TL907: the layers are not in state_dict(): a new instance loaded from a checkpoint computes otherwise)
    assert codes(report, "ListStack") == ["TL901", "TL902", "TL903", "TL904", "TL907"]
    line = line_of(ZOO / "buggy.py", "self.layers = [Mlp(dim)")
    assert {i.line for i in issues(report, verified="ListStack")} == {line}


def test_buggy_rotary_cache_as_plain_tensor(reports):
    report = reports["buggy.py"]
    assert codes(report, "PlainRotaryLM") == ["TL901", "TL902"]
    found = issues(report, "TL901", "PlainRotaryLM")
    assert sorted(i.attribute for i in found) == ["attn.rotary.cos_cached", "attn.rotary.sin_cached"]
    assert all(i.owner_class == "PlainRotary" and i.severity == "warning" for i in found)
    assert {i.line for i in found} == {line_of(ZOO / "buggy.py", "self.cos_cached ="),
                                       line_of(ZOO / "buggy.py", "self.sin_cached =")}


def test_buggy_parameter_behind_detach_never_trains(reports):
    report = reports["buggy.py"]
    assert codes(report, "DetachedGate") == ["TL904"]
    (tl904,) = issues(report, "TL904", "DetachedGate")
    assert tl904.attribute == "gate" and tl904.severity == "warning" and "no gradient" in tl904.message
    assert tl904.line == line_of(ZOO / "buggy.py", "self.gate = nn.Parameter")


def test_every_finding_has_a_line_in_the_file(reports):
    for name, report in reports.items():
        text = (ZOO / name).read_text()
        for issue in report.issues:
            assert issue.line, (name, issue)
        assert len(report_to_findings(report, text, str(ZOO / name))) == len(report.issues)


# -- example inputs from the code, training as a loop runs it (#22) -----------------------------------

def test_inputs_written_only_in_a_training_function_of_the_package(reports):
    cls = class_report(reports["seq.py"], "MaskedEncoder")
    # forward(x, mask) with a bool mask: no guess can make it; train.py's train_step() calls it.
    assert cls.inputs == "(2, 24, 64) float32, mask=(2, 24) bool (from model_zoo/train.py:14, train_step())" \
        or cls.inputs.endswith("train.py:14, train_step())"), cls.inputs
    assert check(cls, "TL903").status == "passed"


def test_two_tensor_arguments_from_the_main_block(reports):
    cls = class_report(reports["seq.py"], "ClsPool")
    assert cls.inputs.startswith("(2, 24, 32) float32, (2, 1, 32) float32 (from ")
    assert "seq.py:%d, the `__main__` block" % line_of(ZOO / "seq.py", "print(model(tokens") in cls.inputs
    # The demo's class token is torch.zeros: a constant input is given random values (else the
    # norm's weight would get zero gradients from it, a false alarm).
    assert "constant float inputs given random values" in cls.inputs


def test_a_block_that_unpacks_three_dimensions_gets_its_sequence_axis(reports):
    cls = class_report(reports["seq.py"], "TokenBlock")
    # 8 tokens do not fit the 24-long position table: the table's own length is tried next.
    assert cls.inputs.startswith("(2, 24, 48) float32 (guessed from qkv = Linear(in_features=48)"), cls.inputs


def test_the_first_layer_forward_applies_is_not_the_first_defined(reports):
    cls = class_report(reports["seq.py"], "NarrowFirst")
    assert cls.inputs.startswith("(2, 40) float32 (guessed from embed = Linear(in_features=40), the first layer "
                                 "forward applies to features)"), cls.inputs


def test_a_video_model_that_pools_a_fixed_clip_gets_the_full_clip(reports):
    cls = class_report(reports["video.py"], "ClipClassifier")
    assert cls.inputs.startswith("(2, 3, 16, 224, 224) float32"), cls.inputs
    assert check(cls, "TL903").status == "passed", cls


def test_gradient_checks_run_on_nearly_every_class_built(reports):
    built = [c for report in reports.values() for c in report.classes if c.status != "skipped"]
    ran = [c for c in built if check(c, "TL903").status != "skipped"]
    assert len(ran) >= 0.95 * len(built), [(c.name, c.partial_reason) for c in built if c not in ran]
    for cls in built:
        skipped = check(cls, "TL903").status == "skipped"
        assert (cls.status == "partly verified") == skipped or cls.status == "failed", cls
        if skipped:
            assert cls.partial_reason.startswith("gradients skipped: "), cls


def test_buggy_parameter_moved_with_a_dtype_hides_the_leaf_that_gets_the_gradients(reports):
    report = reports["buggy.py"]
    assert codes(report, "DtypeMovedScale") == ["TL901", "TL903", "TL904"]
    (tl903,) = issues(report, "TL903", "DtypeMovedScale")
    assert "computed from an nn.Parameter" in tl903.message and "ToCopyBackward0" in tl903.message
    assert "nn.Parameter(t.to(...))" in tl903.message
    assert tl903.line == line_of(ZOO / "buggy.py", "self.scale = nn.Parameter(torch.ones(dim)).to(")


def test_buggy_non_leaf_gate_fails_the_second_step_at_its_line(reports):
    report = reports["buggy.py"]
    cls = class_report(report, "NonLeafGate")
    assert cls.status == "failed"
    (tl905,) = issues(report, "TL905", "NonLeafGate")
    assert tl905.message.startswith("step 2 of training failed (step 1 ran): RuntimeError: Trying to backward "
                                    "through the graph a second time")
    assert "gate is a non-leaf tensor built before training" in tl905.message
    line = line_of(ZOO / "buggy.py", "self.gate = torch.ones(dim, requires_grad=True) * 1e-4")
    assert tl905.line == line
    (tl903,) = issues(report, "TL903", "NonLeafGate")  # its hidden leaf got a gradient on step 1
    assert tl903.line == line and "a leaf tensor with requires_grad" in tl903.message


def test_buggy_head_created_on_the_first_batch(reports):
    report = reports["buggy.py"]
    # (TL907: the head is in the trained module's state_dict() only: a new instance cannot load it)
    assert codes(report, "LateHead") == ["TL906", "TL907"]
    (tl906,) = issues(report, "TL906", "LateHead")
    assert tl906.severity == "error" and sorted(tl906.paths) == ["head.bias", "head.weight"]
    assert "created on the first forward" in tl906.message and "nn.LazyLinear" in tl906.message
    # Where forward creates it, not the `self.head = None` of __init__.
    assert tl906.line == line_of(ZOO / "buggy.py", "self.head = nn.Linear(x.shape[-1]")
    assert check(class_report(report, "LateHead"), "TL906").status == "failed"


def test_buggy_parameter_replaced_on_every_step(reports):
    report = reports["buggy.py"]
    assert codes(report, "RedecayedEachStep") == ["TL906"]
    (tl906,) = issues(report, "TL906", "RedecayedEachStep")
    assert "replaced by new nn.Parameter objects" in tl906.message and "(every step)" in tl906.message
    assert tl906.line == line_of(ZOO / "buggy.py", "self.scale = nn.Parameter(self.scale.detach()")


def test_a_class_without_inputs_of_its_own_gets_those_its_caller_gave_it(reports):
    # PlainRotary has no layer to guess from and no call of its own: PlainRotaryLM's attention
    # called it while PlainRotaryLM was verified, and those inputs are used.
    cls = class_report(reports["buggy.py"], "PlainRotary")
    assert cls.status == "verified"
    assert cls.inputs == "(2, 2, 8, 16) float32 (seen when PlainRotaryLM.forward called it)"
    assert check(cls, "TL903").status == "passed"


def test_buggy_twins_on_cuda_show_what_a_gpu_user_meets():
    if not cuda_available():
        pytest.skip("CUDA-only behaviour: torch.cuda.is_available() is False here")
    report = verify_file(str(ZOO / "buggy.py"), python=torch_python(), timeout=300, device="cuda")
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    # The computed copy of the parameter is a plain tensor: model.to("cuda") leaves it on the CPU.
    assert codes(report, "DtypeMovedScale") == ["TL901", "TL902", "TL903", "TL904"]
    (tl902,) = issues(report, "TL902", "DtypeMovedScale")
    assert tl902.attribute == "scale" and "still on cpu" in tl902.message
    # The head forward creates lands on the CPU while the inputs are on the GPU: forward fails there.
    (tl905,) = issues(report, "TL905", "LateHead")
    assert "same device" in tl905.message and class_report(report, "LateHead").status == "failed"
    assert tl905.line == line_of(ZOO / "buggy.py", "self.head = nn.Linear(x.shape[-1]") + 1  # its call
