"""TL205 (and TL202) through the project's functions: a layer re-bound by a helper that the model is
handed to after DistributedDataParallel (or an optimizer) took its parameters, the helper in another
file of the project (read with the inference layer), a helper calling another (three calls deep at
most), or a method of the model's class. Quiet where the helper runs before the wrapping, the model
is wrapped again, the helper only reads or moves the layer, or the function is a library's."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict, List

from torchlint.analysis.findings import Finding
from torchlint.engine import check_source
from torchlint.inference.layer import JediInference


def write_package(root: Path, files: Dict[str, str]) -> None:
    package = root / "zoo"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))


def check(root: Path, name: str = "train.py", codes=("TL205",), infer: bool = True,
          layer: JediInference = None) -> List[Finding]:
    path = root / "zoo" / name
    inference = layer if layer is not None else JediInference(str(root)) if infer else None
    result = check_source(path.read_text(), str(path), inference=inference)
    assert result.parse_error is None and not result.internal_errors, result
    return [f for f in result.findings if f.code in codes]


SURGERY = """\
import torch.nn as nn


def replace_head(net, classes):
    net.fc = nn.Linear(512, classes)


def prepare(model, classes):
    model.eval()
    replace_head(model, classes)


def outer(model):
    prepare(model, 10)


def outermost(model):
    outer(model)


def only_reads(net):
    return net.fc.in_features


def moves(net, device):
    net.fc.to(device)
    net.fc = net.fc.to(device)


def on_a_copy(net):
    import copy
    net = copy.deepcopy(net)
    net.fc = nn.Linear(512, 2)
    return net


def again(net, depth):
    if depth:
        again(net, depth - 1)
"""

NETS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(512, 1000)

    def reset_head(self, classes=10):
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(x)
"""

TRAIN = """\
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .nets import Net
from .surgery import {helper}


def finetune(loader, rank):
    model = Net()
    ddp = DDP(model, device_ids=[rank])
    {call}
    for x in loader:
        ddp(x).sum().backward()
"""


def train(helper: str, call: str) -> str:
    return TRAIN.format(helper=helper, call=call)


def test_a_helper_of_another_file_that_replaces_the_head_after_ddp(tmp_path):
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS,
                             "train.py": train("replace_head", "replace_head(model, 10)")})
    (finding,) = check(tmp_path)
    assert (finding.range.start.line, finding.range.start.column) == (11, 4)  # the call
    assert finding.message.startswith("`replace_head(...)` replaces `net.fc` of `model` (surgery.py:5) after "
                                      "DistributedDataParallel on line 10 took the parameters of `model`: DDP does "
                                      "not average the new layer's gradients")
    assert not finding.fixes
    assert [r.range.start.line for r in finding.related] == [10]  # the wrapping (the re-binding is elsewhere)


def test_by_names_alone_another_file_is_not_read(tmp_path):
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS,
                             "train.py": train("replace_head", "replace_head(model, 10)")})
    assert check(tmp_path, infer=False) == []


def test_a_helper_calling_helpers_three_calls_deep_and_no_further(tmp_path):
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS,
                             "train.py": train("outer, outermost, prepare",
                                               "prepare(model, 10)\n    outer(model)\n    outermost(model)")})
    found = check(tmp_path)
    assert [f.range.start.line for f in found] == [11, 12]  # outermost is four calls from the re-binding
    assert "(in `replace_head`, surgery.py:5)" in found[0].message
    assert "(in `prepare` -> `replace_head`, surgery.py:5)" in found[1].message


def test_a_module_imported_whole_and_keyword_arguments(tmp_path):
    text = train("replace_head", "surgery.replace_head(classes=3, net=model)").replace(
        "from .surgery import replace_head", "from . import surgery")
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS, "train.py": text})
    (finding,) = check(tmp_path)
    assert finding.message.startswith("`surgery.replace_head(...)` replaces `net.fc` of `model` (surgery.py:5)")


def test_a_method_of_the_model_class_of_another_file(tmp_path):
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS,
                             "train.py": train("replace_head", "model.reset_head()")})
    (finding,) = check(tmp_path)
    assert finding.range.start.line == 11
    assert finding.message.startswith("`model.reset_head(...)` replaces `self.fc` of `model` (nets.py:10)")


def test_a_method_of_the_model_class_of_the_same_file_by_names_alone(tmp_path):
    text = train("replace_head", "model.reset_head()").replace("from .nets import Net\n", "") \
        + "\n\n" + NETS.replace("import torch.nn as nn\n", "")
    write_package(tmp_path, {"surgery.py": SURGERY, "train.py": text})
    (finding,) = check(tmp_path, infer=False)
    assert finding.message.startswith("`model.reset_head(...)` replaces `self.fc` of `model` (line 23)")
    assert [r.range.start.line for r in finding.related] == [23, 9]  # the re-binding, the wrapping


def test_quiet_where_the_helper_runs_before_the_wrapping_or_the_model_is_wrapped_again(tmp_path):
    before = train("replace_head", "pass").replace("    ddp = DDP", "    replace_head(model, 10)\n    ddp = DDP")
    again = train("replace_head", "replace_head(model, 10)\n    ddp = DDP(model, device_ids=[rank])")
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS, "before.py": before, "again.py": again})
    assert check(tmp_path, "before.py") == [] and check(tmp_path, "again.py") == []


def test_quiet_where_the_helper_reads_moves_copies_or_recurses(tmp_path):
    text = train("again, moves, on_a_copy, only_reads",
                 "only_reads(model)\n    moves(model, 'cpu')\n    best = on_a_copy(model)\n    again(model, 3)")
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS, "train.py": text})
    assert check(tmp_path) == []


def test_quiet_where_the_helper_is_handed_the_wrapper_too(tmp_path):
    surgery = SURGERY + "\n\ndef rewrap(net, ddp):\n    net.fc = nn.Linear(512, 2)\n"
    write_package(tmp_path, {"surgery.py": surgery, "nets.py": NETS,
                             "train.py": train("rewrap", "rewrap(model, ddp)")})
    assert check(tmp_path) == []


def test_quiet_on_a_library_function_that_replaces_the_head(tmp_path):
    # The same helper, installed: a library's function is not the project's to follow.
    project, library = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    (library / "finetuning").mkdir(parents=True)
    (library / "finetuning" / "__init__.py").write_text(SURGERY)
    text = train("replace_head", "replace_head(model, 10)").replace("from .surgery", "from finetuning")
    write_package(project, {"nets.py": NETS, "train.py": text})
    layer = JediInference(str(project))
    layer.sys_path.append(str(library))
    assert check(project, layer=layer) == []
    # (inside the project, the same file is followed)
    (project / "finetuning").mkdir()
    (project / "finetuning" / "__init__.py").write_text(SURGERY)
    assert len(check(project)) == 1


def test_tl202_an_optimizer_built_before_a_helper_of_another_file_replaces_the_head(tmp_path):
    text = """\
    import torch
    from .nets import Net
    from .surgery import replace_head


    def finetune(loader):
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        replace_head(model, 10)
        for x in loader:
            model(x).sum().backward()
            optimizer.step()


    def rebuilt(loader):
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        replace_head(model, 10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
    """
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS, "train.py": text})
    (finding,) = check(tmp_path, codes=("TL202",))
    assert finding.range.start.line == 9
    assert finding.message.startswith("`replace_head(...)` replaces `net.fc` (surgery.py:5) after the optimizer on "
                                      "line 8 took the parameters of the model it is given")
    assert check(tmp_path, codes=("TL202",), infer=False) == []


def test_tl202_a_helper_of_the_same_file_by_names_alone(tmp_path):
    text = """\
    import torch
    import torch.nn as nn


    def new_head(net):
        net.fc = nn.Linear(512, 10)


    def finetune(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        new_head(model)
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
    """
    write_package(tmp_path, {"train.py": text})
    (finding,) = check(tmp_path, codes=("TL202",), infer=False)
    assert finding.range.start.line == 11 and "(line 6)" in finding.message
    assert [r.range.start.line for r in finding.related] == [6, 10]


def test_saving_the_helper_file_makes_the_check_one_to_run_again(tmp_path):
    # The language server checks again the documents whose answers were read from a saved file
    # (ProjectFiles.read_for, as for a base class of another file).
    write_package(tmp_path, {"surgery.py": SURGERY, "nets.py": NETS,
                             "train.py": train("replace_head", "replace_head(model, 10)")})
    layer = JediInference(str(tmp_path))
    assert len(check(tmp_path, layer=layer)) == 1
    assert str(tmp_path / "zoo" / "train.py") in layer.checks_reading(str(tmp_path / "zoo" / "surgery.py"))
