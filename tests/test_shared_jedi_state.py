"""What makes a CLI run's jedi layer cheaper (JediInference(share_states=True)): files share
jedi's inference state, jedi reads a reduced text of each file, builtins are looked into in the
worker's own process; and a CLI worker runs with the garbage collector off (ProcessState.collect_now).
None may change an answer or a dependency recorded in the cache, import what jedi's interpreter
would not, or let memory grow without bound."""
from __future__ import annotations

import ast
import gc
import json
import weakref
from pathlib import Path

import pytest

from torchlint.cli import checking, process_state, workers
from torchlint.cli.checking import Job
from torchlint.engine import CheckOptions
from torchlint.cli.process_state import ProcessState
from torchlint.inference import layer as inference_module
from torchlint.inference.layer import JediInference
from torchlint.inference.jedi_access import BudgetSpent
from torchlint.inference.inference_cache import InferenceCache
from torchlint.analysis.source import SourceText
from torchlint.analysis.values import Kind

TENSOR_HELPERS = "import torch\n\n\ndef make_weight(n):\n    return torch.randn(n, n)\n\n\nWEIGHT = torch.zeros(3)\n"
MODULE_HELPERS = "import torch.nn as nn\n\n\ndef make_weight(n):\n    return nn.Linear(n, n)\n\n\nWEIGHT = nn.Linear(3, 3)\n"
MODEL = "from helpers import make_weight\n\nw = make_weight(3)\n"
SCRIPT = "from util import make_weight\n\nw = make_weight(3)\n"


def project(tmp_path: Path) -> Path:
    """a.py and b.py use helpers.py, at the root, which returns a tensor; scripts/c.py uses
    scripts/util.py, which returns a layer. scripts/ is a folder, not a package: jedi finds
    util.py only for a file in that folder (its sys.path differs from a.py's)."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    (root / "helpers.py").write_text(TENSOR_HELPERS)
    (root / "scripts" / "util.py").write_text(MODULE_HELPERS)
    (root / "a.py").write_text(MODEL)
    (root / "b.py").write_text(MODEL)
    (root / "scripts" / "c.py").write_text(SCRIPT)
    return root


def ask(layer: JediInference, path: Path):
    """The answer about what the file's last line assigns, and the file's jedi inference state."""
    text = path.read_text()
    call = ast.parse(text).body[-1].value
    inference = layer.for_file(text, str(path), SourceText(text))
    value = inference.classify(call, None)
    state = inference._script._inference_state if inference._script is not None else None
    inference.finish()
    return value, state


def test_files_share_a_state_only_with_files_whose_imports_resolve_alike(tmp_path, layers):
    root = project(tmp_path)
    files = [root / "a.py", root / "scripts" / "c.py", root / "b.py"]
    alone = layers(root)
    shared = layers(root, share_states=True)
    expected = [ask(alone, path)[0] for path in files]
    assert [value.kind for value in expected] == [Kind.TENSOR, Kind.MODULE, Kind.TENSOR]

    answers = [ask(shared, path) for path in files]
    assert [value for value, _ in answers] == expected
    (_, a_state), (_, c_state), (_, b_state) = answers
    assert b_state is a_state  # a.py and b.py: one state, torch inferred once for both
    assert c_state is not b_state  # scripts/c.py imports from its folder: a state of its own
    assert ask(alone, root / "b.py")[1] is not ask(alone, root / "a.py")[1]  # without sharing: one each


def test_each_file_records_the_project_files_its_answers_came_from(tmp_path, layers):
    """b.py's answer comes from helpers.py as much as a.py's did, though a.py's questions loaded it
    first: the shared state forgets project modules after each file, so b.py loads it again."""
    root = project(tmp_path)
    for name in ("a.py", "b.py"):
        (root / name).write_text("from helpers import WEIGHT\n\nw = WEIGHT\n")
    cache = InferenceCache(tmp_path / "cache")
    layer = layers(root, share_states=True, cache=cache)
    for name in ("a.py", "b.py"):
        assert ask(layer, root / name)[0].kind is Kind.TENSOR
    entries = [json.loads(entry.read_text()) for entry in sorted(cache.directory.glob("*/*.json"))]
    assert len(entries) == 2
    assert [[d[0] for d in entry["dependencies"]] for entry in entries] == [[str(root / "helpers.py")]] * 2

    # And the next run sees a change of helpers.py in both.
    (root / "helpers.py").write_text(MODULE_HELPERS)
    later = layers(root, share_states=True, cache=cache)
    assert [ask(later, root / name)[0].kind for name in ("a.py", "b.py")] == [Kind.MODULE, Kind.MODULE]


def test_a_question_cut_short_is_not_shared(tmp_path, layers, monkeypatch):
    """jedi may keep a partial answer from a question the budget stopped: its state serves no
    other file."""
    root = project(tmp_path)
    layer = layers(root, share_states=True, budget=600)
    _, first = ask(layer, root / "a.py")
    classify = inference_module.FileInference._classify

    def stopped(self, node, *question):
        self.script  # the state is taken, then the budget runs out mid-question
        raise BudgetSpent()

    monkeypatch.setattr(inference_module.FileInference, "_classify", stopped)
    assert ask(layer, root / "b.py")[0] is None
    monkeypatch.setattr(inference_module.FileInference, "_classify", classify)
    value, state = ask(layer, root / "b.py")
    assert value.kind is Kind.TENSOR and state is not first


def test_a_state_serves_a_bounded_number_of_files(tmp_path, layers, monkeypatch):
    monkeypatch.setattr(inference_module, "SCRIPTS_PER_STATE", 2)
    root = project(tmp_path)
    layer = layers(root, share_states=True)
    layer.warm()  # its script is the first that the first state serves
    states = [ask(layer, root / name)[1] for name in ("a.py", "b.py", "a.py", "b.py", "a.py")]
    assert states[1] is states[2] and states[3] is states[4]
    assert len({id(state) for state in states}) == 3


class Cycle:
    def __init__(self):
        self.me = self


@pytest.fixture
def worker_collector(monkeypatch):
    """This process as a CLI worker sees it: the collector off, ProcessState.collect_now after
    each file. Its layers: none (a worker of the --no-infer mode), unless a test adds one."""
    was_enabled = gc.isenabled()
    # (this test process may be past a worker's limit: a worker collects after a trim)
    monkeypatch.setattr(process_state, "WORKER_MEMORY_LIMIT", 2 ** 62)
    gc.disable()
    yield ProcessState(as_a_worker=True)
    gc.unfreeze()
    gc.collect()
    if was_enabled:
        gc.enable()


def test_a_worker_leaves_what_a_file_left_out_of_later_collections(worker_collector, monkeypatch):
    monkeypatch.setattr(process_state, "COLLECT_AFTER_GROWTH", 2 ** 40)
    gc.unfreeze()
    garbage = weakref.ref(Cycle())  # a cycle a file left behind
    worker_collector.collect_now()
    assert gc.get_freeze_count() > 0 and not gc.isenabled()
    assert garbage() is not None  # not collected yet: memory has not grown enough


def test_a_worker_collects_once_its_memory_has_grown(worker_collector, monkeypatch):
    monkeypatch.setattr(process_state, "COLLECT_AFTER_GROWTH", 0)
    garbage = weakref.ref(Cycle())
    worker_collector.collect_now()
    assert garbage() is None and not gc.isenabled()


class TrimmingLayer:
    """What ProcessState.collect_now asks of a jedi layer: whether it dropped what it kept."""

    def __init__(self):
        self.trims = []

    def trim_memory(self, limit):
        return bool(self.trims) and self.trims.pop()


def test_a_worker_with_a_jedi_layer_collects_after_its_trims_only(worker_collector, monkeypatch):
    # A collection walks jedi's model of torch (2-3 s on a large run): growth alone does not start
    # one in a worker whose layer trims, and collects what it dropped.
    layer = TrimmingLayer()
    worker_collector.layers[("root", None, None, None)] = layer
    monkeypatch.setattr(process_state, "COLLECT_AFTER_GROWTH", 0)
    garbage = weakref.ref(Cycle())
    worker_collector.collect_now()
    assert garbage() is not None
    layer.trims.append(True)
    worker_collector.collect_now()
    assert garbage() is None and not gc.isenabled()


def test_a_worker_collects_every_so_many_files_where_memory_cannot_be_read(worker_collector, monkeypatch):
    monkeypatch.setattr(process_state, "peak_memory", lambda: None)
    monkeypatch.setattr(process_state, "COLLECT_EVERY", 3)
    garbage = weakref.ref(Cycle())
    worker_collector.collect_now()
    worker_collector.collect_now()
    assert garbage() is not None
    worker_collector.collect_now()
    assert garbage() is None


@pytest.mark.parametrize("files, as_a_worker", [(workers.PARALLEL_MIN_FILES, True), (workers.PARALLEL_MIN_FILES - 1, False)])
def test_many_files_checked_in_the_main_process_are_collected_as_a_worker_does(files, as_a_worker, monkeypatch):
    # One CPU: no workers. Python's own schedule walked jedi's model of torch at every collection
    # (52 CPU s against 39 on transformers' models) and nothing trimmed the process.
    layer = TrimmingLayer()
    limits = []
    monkeypatch.setattr(layer, "trim_memory", lambda limit: limits.append(limit) or False)
    state = ProcessState()
    state.layers[("root", None, None, None)] = layer
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 1)
    collector_on = []

    monkeypatch.setattr(checking, "read_text", lambda job, checked: collector_on.append(gc.isenabled()))
    jobs = [Job(path=str(number), display=str(number), options=CheckOptions()) for number in range(files)]
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        assert [checked.report.path for checked in workers.run_jobs(jobs, state)] == [job.path for job in jobs]
        assert gc.isenabled() and not state.as_a_worker  # as it was before the run
    finally:
        gc.unfreeze()  # (what each file left was frozen, as in a worker)
        if not was_enabled:
            gc.disable()
    assert collector_on == [not as_a_worker] * files
    assert limits == ([process_state.WORKER_MEMORY_LIMIT] * files if as_a_worker else [])


def test_the_main_process_keeps_pythons_own_schedule(monkeypatch):
    frozen = gc.get_freeze_count()
    enabled = gc.isenabled()
    ProcessState().collect_now()
    assert gc.get_freeze_count() == frozen and gc.isenabled() == enabled


SPREAD = '''import torch
import torch.nn as nn

__all__ = ["Net", "unused", "make", "Other"]


def unused():
    return torch.zeros(1)


def make(n):
    return torch.randn(n)


class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = make(2)


def annotated() -> "Other":
    return Other()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = make(3)
        self.b = annotated()


def far_away():
    return nn.Linear(2, 2)
'''


def questions(text: str):
    """The calls on the right of `self.a = make(3)` and `self.b = annotated()`."""
    tree = ast.parse(text)
    net = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Net")
    init = net.body[0]
    return [init.body[1].value, init.body[2].value]


def test_jedi_reads_only_what_a_question_needs_and_answers_alike(tmp_path, layers):
    root = tmp_path / "project"
    root.mkdir()
    path = root / "spread.py"
    path.write_text(SPREAD)
    full = layers(root).for_file(SPREAD, str(path), SourceText(SPREAD))
    reduced_layer = layers(root, share_states=True)
    reduced = reduced_layer.for_file(SPREAD, str(path), SourceText(SPREAD), ast.parse(SPREAD))
    first, second = questions(SPREAD)

    assert reduced.classify(first, None) == full.classify(first, None)
    assert reduced.classify(first, None).kind is Kind.TENSOR
    kept = reduced._script._code
    lines = SPREAD.splitlines()
    assert "def make(n):" in kept and "class Net(nn.Module):" in kept  # the question's class, the helper it calls
    assert "def annotated() -> \"Other\":" in kept and "class Other(nn.Module):" in kept  # named in a string too
    assert "def unused():" not in kept and "def far_away():" not in kept  # named only in __all__, or not at all
    # Every line jedi reads is where it is in the file.
    assert all(line == lines[number] for number, line in enumerate(kept.splitlines()) if line)

    assert reduced.classify(second, None) == full.classify(second, None)
    assert reduced.classify(second, None).kind is Kind.MODULE
    assert reduced._script._code == kept  # the same text answered both


def test_what_module_level_code_calls_is_kept(tmp_path, layers):
    root = tmp_path / "project"
    root.mkdir()
    path = root / "spread.py"
    text = SPREAD + "\n\nlater = far_away()\n"
    path.write_text(text)
    full = layers(root).for_file(text, str(path), SourceText(text))
    reduced = layers(root, share_states=True).for_file(text, str(path), SourceText(text), ast.parse(text))
    call = ast.parse(text).body[-1].value
    assert reduced.classify(call, None) == full.classify(call, None)
    assert reduced.classify(call, None).kind is Kind.MODULE
    assert "def far_away():" in reduced._script._code and "def unused():" not in reduced._script._code


def test_a_question_outside_what_is_kept_widens_the_text(tmp_path, layers, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    path = root / "spread.py"
    text = SPREAD + "\n\ndef elsewhere():\n    return far_away()\n"
    path.write_text(text)
    layer = layers(root, share_states=True)
    inference = layer.for_file(text, str(path), SourceText(text), ast.parse(text))
    first = questions(SPREAD)[0]
    assert inference.classify(first, None).kind is Kind.TENSOR
    assert "def far_away():" not in inference._script._code
    call = ast.parse(text).body[-1].body[0].value  # far_away() in elsewhere()
    assert inference.classify(call, None).kind is Kind.MODULE
    assert inference._script._code == text  # widened once: the whole text, not a second reduced one


IN_PROCESS_PROBE = '''
import ast, json, sys
from pathlib import Path
from torchlint.inference.layer import JediInference
from torchlint.inference.jedi_access import SameProcessEnvironment
from torchlint.analysis.source import SourceText
root = Path(sys.argv[1])
layer = JediInference(str(root), share_states=True)
assert isinstance(layer.environment, SameProcessEnvironment)
answers = []
for name in ("a.py", "b.py", "uses_stdlib.py", "uses_readline.py"):
    text = (root / name).read_text()
    inference = layer.for_file(text, str(root / name), SourceText(text), ast.parse(text))
    value = inference.classify(ast.parse(text).body[-1].value, None)
    answers.append(value.kind.value if value else None)
    inference.finish()
extensions = sorted(name for name, module in list(sys.modules.items())
                    if str(getattr(module, "__file__", "") or "").endswith((".so", ".pyd"))
                    and "site-packages" in str(module.__file__))
print(json.dumps({"answers": answers, "torch": [m for m in sys.modules if m == "torch" or m.startswith("torch.")],
                  "extensions": extensions, "readline": "readline" in sys.modules}))
'''


def test_a_cli_layer_looks_into_builtins_in_its_own_process_and_never_imports_torch(tmp_path):
    """A CLI layer on torchlint's own Python starts no jedi interpreter: what that interpreter
    did (builtins, literals, finding modules) happens in the worker, which must still never
    import torch or any installed package's extension, only read their sources and stubs."""
    import subprocess
    import sys
    root = project(tmp_path)
    (root / "uses_stdlib.py").write_text("import math\n\nx = math.floor(2.5)\n")
    (root / "uses_readline.py").write_text("import readline\n\nx = readline.get_line_buffer()\n")
    run = subprocess.run([sys.executable, "-c", IN_PROCESS_PROBE, str(root)], capture_output=True, text=True,
                         timeout=300, cwd=str(root))
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["answers"] == ["tensor", "tensor", "other", "other"]  # from stubs: a tensor, an int, a str
    assert found["torch"] == [] and found["extensions"] == [] and not found["readline"]


def test_a_question_that_failed_leaves_the_next_one_a_working_script(tmp_path, layers, monkeypatch):
    """jedi failing in one question (its own bug) drops the shared state and the parsed tree:
    the file's later questions still get answers, from a fresh script."""
    root = tmp_path / "project"
    root.mkdir()
    path = root / "spread.py"
    path.write_text(SPREAD)
    inference = layers(root, share_states=True).for_file(SPREAD, str(path), SourceText(SPREAD), ast.parse(SPREAD))
    first, second = questions(SPREAD)
    classify = inference_module.FileInference._classify
    failed = []

    def fails_once(self, node, *question):
        if not failed:
            failed.append(node)
            self.script  # the script is made, then jedi raises midway
            raise KeyError("jedi's own bug")
        return classify(self, node, *question)

    monkeypatch.setattr(inference_module.FileInference, "_classify", fails_once)
    assert inference.classify(first, None) is None
    assert inference.classify(second, None) is not None


METHODS = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = self.make_scale()
        self.reset()

    def make_scale(self):
        return torch.ones(3)

    def reset(self):
        self.bias = torch.zeros(3)

    def forward(self, x):
        self.last = x.detach()
        return x * self.scale + self.bias

    def extra_repr(self):
        return "block"


class Mixin:
    def helper(self):
        return nn.Linear(2, 2)


class Head(Mixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = self.helper()
        self.bias = self.proj.bias
'''


def test_a_kept_class_keeps_only_the_methods_a_question_needs(tmp_path, layers):
    """The text jedi reads keeps, of a class, the method holding the question, the dunders, the
    methods its words name, and those assigning an attribute its words name; of another class,
    the methods only when that class is kept by name (a base), never for a word of its own."""
    root = tmp_path / "project"
    root.mkdir()
    path = root / "methods.py"
    path.write_text(METHODS)
    tree = ast.parse(METHODS)
    block, _, head = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    full = layers(root).for_file(METHODS, str(path), SourceText(METHODS))
    reduced = layers(root, share_states=True).for_file(METHODS, str(path), SourceText(METHODS), tree)
    scale = block.body[0].body[1].value  # self.make_scale()
    assert reduced.classify(scale, None) == full.classify(scale, None)
    assert reduced.classify(scale, None).kind is Kind.TENSOR
    kept = reduced._script._code
    assert "def make_scale(self):" in kept and "def reset(self):" in kept  # named in __init__
    assert "def forward(self, x):" not in kept and "def extra_repr(self):" not in kept
    assert "class Head" not in kept  # `bias` is a word of Block's, but no word names Head
    lines = METHODS.splitlines()
    assert len(kept.splitlines()) <= len(lines)
    assert all(line == lines[number] for number, line in enumerate(kept.splitlines()) if line)

    other = layers(root, share_states=True).for_file(METHODS, str(path), SourceText(METHODS), tree)
    proj = head.body[0].body[1].value  # self.helper(): a method of a base of the same file
    assert other.classify(proj, None) == full.classify(proj, None)
    assert other.classify(proj, None).kind is Kind.MODULE
    kept = other._script._code
    assert "class Mixin:" in kept and "def helper(self):" in kept and "class Block" not in kept


def test_a_class_with_no_method_kept_still_parses(tmp_path):
    from torchlint.inference.reduced_text import TopLevel
    text = "class Bare:\n    @property\n    def x(self):\n        return 1\n\n    def y(self):\n        return 2\n\n\n" \
           "value = Bare\n"
    units = TopLevel(ast.parse(text), SourceText(text))
    kept = units.closure(set())
    reduced = units.text_of(kept)
    assert reduced == "class Bare:\n    pass\n" + "\n" * 7 + "value = Bare\n"  # (lines 3-9 blank)
    ast.parse(reduced)
