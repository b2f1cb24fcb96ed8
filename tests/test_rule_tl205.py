"""TL205 stale-wrapper: under torch, a layer replaced after DistributedDataParallel took the model
really trains apart on each process (two gloo processes on the CPU), and the fix that wraps after
the change makes them agree; an AveragedModel built before the change fails to average it; the
messages are exact; and what is wrapped after the change, or wrapped again, stays quiet."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from torchlint.analysis.findings import Severity
from testkit.rules import findings, fixed, only, preferred, quiet, run

PREPARE = """\
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def prepare(model):
    ddp = DDP(model)
    model[1] = nn.Linear(4, 2)
    return ddp
"""

# Two processes each take one step of the prepared model on their own batch, then compare every
# parameter's gradient: DDP averages them, so they agree wherever it synchronised.
TWO_PROCESSES = """\
import json, socket, sys
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, sys.argv[1])
import prepared


def step(rank, port, out):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    wrapped = prepared.prepare(model)
    torch.manual_seed(1 + rank)
    wrapped(torch.randn(8, 4)).square().sum().backward()
    gathered = [None, None]
    dist.all_gather_object(gathered, [p.grad for p in model.parameters()])
    if rank == 0:
        with open(out, "w") as f:
            json.dump([bool(torch.allclose(a, b)) for a, b in zip(*gathered)], f)
    dist.barrier()  # (no destroy_process_group: gloo's shutdown aborts now and then, after the answer)


if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(step, args=(port, sys.argv[2]), nprocs=2, join=True)
"""


def _gradients_agree(tmp_path, source):
    """Per parameter of the model, whether the two processes' gradients agree after one step."""
    folder = tmp_path / ("run%d" % len(list(tmp_path.iterdir())))
    folder.mkdir()
    (folder / "prepared.py").write_text(source)
    (folder / "two.py").write_text(TWO_PROCESSES)
    out = folder / "agree.json"
    done = subprocess.run([sys.executable, str(folder / "two.py"), str(folder), str(out)], capture_output=True,
                          text=True, timeout=300)
    assert out.exists(), done.stderr  # (the answer is written before the processes end)
    return json.loads(out.read_text())


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch build has no torch.distributed")
def test_tl205_ddp_the_bug_is_real_and_the_fix_synchronises(tmp_path):
    assert _gradients_agree(tmp_path, PREPARE) == [False] * 4  # the new layer's, and here the others' too
    fix = preferred(only(PREPARE, "TL205"))
    assert not fix.is_safe and fix.title == "Wrap in DistributedDataParallel after `model[1]` is replaced (move line 6)"
    result = fixed(PREPARE, fix)
    assert "    model[1] = nn.Linear(4, 2)\n    ddp = DDP(model)\n" in result
    quiet(result, "TL205")
    assert _gradients_agree(tmp_path, result) == [True] * 4


def test_tl205_ddp_message_and_severity():
    finding = only(PREPARE, "TL205")
    assert finding.severity is Severity.WARNING
    assert (finding.range.start.line, finding.range.start.column) == (7, 4)
    assert finding.message == (
        "`model[1]` is replaced after DistributedDataParallel on line 6 took the parameters of `model`: DDP does "
        "not average the new layer's gradients across processes (and its buckets, waiting for the old one's, may "
        "leave the step's other gradients unaveraged too), so each process trains its own copy")
    assert [r.message for r in finding.related] == ["`ddp` takes the parameters `model` has at this point"]


AVERAGED = """\
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel


def average(model):
    swa_model = AveragedModel(model)
    model[1] = nn.Linear(4, 3)
    swa_model.update_parameters(model)
    return swa_model
"""


def test_tl205_averaged_model_the_bug_is_real_and_the_fix_averages():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    with pytest.raises(RuntimeError):  # the old head's average meets the new head's shape
        run(AVERAGED)["average"](model)
    finding = only(AVERAGED, "TL205")
    assert finding.message.startswith("`model[1]` is replaced after AveragedModel on line 6 copied `model`: the "
                                      "average keeps the old layer")
    result = fixed(AVERAGED, preferred(finding))
    averaged = run(result)["average"](torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)))
    assert averaged.module[1].out_features == 3


BYPASS = """\
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, loader, optimizer):
    ddp = DDP(model)
    for batch in loader:
        ddp.module(batch).sum().backward()
        optimizer.step()
"""


def test_tl205_calling_the_wrapped_module_in_a_training_step():
    finding = only(BYPASS, "TL205")
    assert finding.message == (
        "`ddp.module(...)` calls the model DistributedDataParallel on line 5 wraps directly: DDP's forward is skipped, "
        "so this step's gradients are not averaged across processes (call `ddp(...)`)")
    assert "        ddp(batch).sum().backward()\n" in fixed(BYPASS, preferred(finding))


@pytest.mark.parametrize("source", [
    PREPARE.replace("    ddp = DDP(model)\n    model[1] = nn.Linear(4, 2)\n",
                    "    model[1] = nn.Linear(4, 2)\n    ddp = DDP(model)\n"),  # changed, then wrapped
    PREPARE.replace("    return ddp\n", "    ddp = DDP(model)\n    return ddp\n"),  # wrapped again
    PREPARE.replace("model[1] = nn.Linear(4, 2)", "model[1] = model[1].to('cpu')"),  # the same layer
    BYPASS.replace("        ddp.module(batch)", "        with torch.no_grad():\n            ddp.module(batch)"),
])
def test_tl205_quiet_where_the_wrapper_holds_the_model_as_it_is(source):
    assert findings(source if "import torch\n" in source else "import torch\n" + source, "TL205") == []


def test_tl205_a_copy_that_is_not_an_average_is_left_alone():
    source = textwrap.dedent("""\
        import copy
        import torch.nn as nn


        def snapshot(model):
            best = copy.deepcopy(model)
            model.fc = nn.Linear(4, 4)
            return best, model
    """)
    quiet(source, "TL205")
    only(source.replace("best", "ema"), "TL205")
