"""The per-file inference budget holds for any question: jedi's module loading, its lookups
through star imports and its parse of a module stop at the deadline, not only its inference
steps; jedi lists each star-imported module once; and a file the budget stopped is kept in the
disk cache with its answers and its note, so that the next run with that budget finds the same
at once.

The star-import chains are made so that jedi's own list repeats modules as the Fibonacci numbers
grow (each module star-imports the two before it): a library that star-imports a large one
(tsai's ``from ..imports import *`` over fastai and fastcore) has that shape.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jedi
import parso
import pytest

from testkit.support import check_in_a_process
from torchlint.inference import jedi_access
from torchlint.inference.jedi_access import BudgetSpent, within_deadline


NET = textwrap.dedent("""\
    import torch
    from chain.m{top} import *


    class Net(Base):
        def __init__(self):
            super().__init__()
            self.w = torch.randn(3, 3)

        def forward(self, x):
            return x @ self.w
""")


def star_chain(root: Path, depth: int) -> None:
    """A package whose module m<i> star-imports m<i-1> and m<i-2>; the last one defines a Module
    class, which jedi finds after the names of every module it star-imports."""
    package = root / "chain"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "m0.py").write_text("zero = 0\n")
    (package / "m1.py").write_text("from .m0 import *\n")
    for i in range(2, depth):
        (package / ("m%d.py" % i)).write_text("from .m%d import *\nfrom .m%d import *\n" % (i - 1, i - 2))
    with open(package / ("m%d.py" % (depth - 1)), "a") as top:
        top.write("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")


def star_module(root: Path, depth: int):
    """jedi's module value of the chain's top, after a name was looked up through its star imports."""
    text = "from chain.m%d import *\nx = nowhere\n" % (depth - 1)
    script = jedi.Script(text, path=str(root / "user.py"), project=jedi.Project(str(root)))
    assert script.goto(2, 5) == []  # defined nowhere: every star-imported module was looked at
    state = jedi_access.state_of(script)
    (module,) = state.module_cache._name_cache[("chain", "m%d" % (depth - 1))]
    return script, module


def test_jedi_lists_each_star_imported_module_once(tmp_path):
    star_chain(tmp_path, 20)
    _, module = star_module(tmp_path, 20)
    listed = module.star_imports()
    names = [m.string_names[-1] for m in listed]
    assert len(names) == len(set(names)) == 19  # m0 to m18 (jedi's own list: 10,945 entries)
    assert sorted(names) == sorted("m%d" % i for i in range(19))


def test_an_import_and_a_lookup_through_star_imports_stop_at_the_deadline(tmp_path):
    star_chain(tmp_path, 12)
    text = "from chain.m11 import *\nx = nowhere\ny = elsewhere\n"

    def script():
        return jedi.Script(text, path=str(tmp_path / "user.py"), project=jedi.Project(str(tmp_path)))
    with pytest.raises(BudgetSpent) as stopped:
        with within_deadline(0.0):
            script().goto(2, 5)
    assert stopped.value.where == "chain.m11"  # importing what the file star-imports
    # (A state a question was stopped in is not asked again: jedi may have kept a partial answer.)
    script = script()
    assert script.goto(2, 5) == []  # every module loaded now, and each one's star imports listed
    with pytest.raises(BudgetSpent) as stopped:
        with within_deadline(0.0):
            script.goto(3, 5)
    assert stopped.value.where is not None and stopped.value.where.startswith("chain.m")  # reading its names


def test_a_parse_stops_at_the_deadline():
    text = "x = [%s]\n" % ", ".join(str(n) for n in range(50000))  # 100k tokens
    assert parso.parse(text).end_pos == (2, 0)  # (no deadline: parsed whole)
    with pytest.raises(BudgetSpent):
        with within_deadline(0.0):
            parso.parse(text)



def test_a_base_behind_a_deep_star_import_chain_is_found_within_the_budget(tmp_path):
    """Without each module once, the lookup of Base went through 832,039 filters here: past any
    budget, and Net was not known to be a Module."""
    star_chain(tmp_path, 31)
    (tmp_path / "net.py").write_text(NET.format(top=30))
    done = check_in_a_process(["--no-cache", "--format", "json", "net.py"], tmp_path)
    found = json.loads(done.stdout)
    assert [f["code"] for f in found] == ["TL101"], done.stderr
    assert "type inference stopped" not in done.stderr


def test_a_file_stopped_by_the_budget_is_answered_from_the_cache_next_time(tmp_path):
    star_chain(tmp_path, 8)
    (tmp_path / "net.py").write_text(NET.format(top=7))
    cache = tmp_path / "cache"
    first = check_in_a_process(["--infer-budget", "0.000001", "net.py"], tmp_path, TORCHLINT_CACHE_DIR=str(cache))
    (note,) = [line for line in first.stderr.splitlines() if "type inference stopped" in line]
    assert "net.py" in note and "names alone" in note
    (entry,) = cache.glob("v*/*/*.json")
    stored = json.loads(entry.read_text())
    assert stored["budget"] == 0.000001 and "type inference stopped" in stored["note"]
    second = check_in_a_process(["--infer-budget", "0.000001", "net.py"], tmp_path, TORCHLINT_CACHE_DIR=str(cache))
    assert second.stdout == first.stdout and note in second.stderr.splitlines()
    # Another budget is another run: asked again, and now with time to find Net's base.
    third = check_in_a_process(["--infer-budget", "30", "net.py"], tmp_path, TORCHLINT_CACHE_DIR=str(cache))
    assert "TL101" in third.stdout and "type inference stopped" not in third.stderr


def test_json_and_sarif_say_which_files_were_checked_by_names_alone(tmp_path):
    star_chain(tmp_path, 8)
    (tmp_path / "net.py").write_text(NET.format(top=7))
    (tmp_path / "plain.py").write_text("import torch\n")
    stopped = check_in_a_process(["--no-cache", "--infer-budget", "0.000001", "--format", "json", "."], tmp_path)
    entries = json.loads(stopped.stdout)
    (said,) = [e for e in entries if e["code"] is None]
    assert Path(said["filename"]).name == "net.py" and said["severity"] == "info"
    assert said["message"].startswith("checked by names alone: type inference stopped")
    sarif = check_in_a_process(["--no-cache", "--infer-budget", "0.000001", "--format", "sarif", "."], tmp_path)
    (notification,) = json.loads(sarif.stdout)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "note" and "names alone" in notification["message"]["text"]
    whole = check_in_a_process(["--no-cache", "--infer-budget", "30", "--format", "json", "."], tmp_path)
    assert [e["code"] for e in json.loads(whole.stdout)] == ["TL101"]
