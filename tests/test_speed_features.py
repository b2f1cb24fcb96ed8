"""What keeps `torchlint check` fast without changing its answers: jedi's answers kept on disk
(and dropped when what they came from changes), the per-file inference budget, the progress line
on a terminal, and workers that never share a jedi interpreter with the process that forked them.
"""
from __future__ import annotations

import ast
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchlint import cli
from torchlint.cli import workers
from torchlint.cli.process_state import ProcessState
from torchlint.inference.file_inference import answer_key
from torchlint.inference.layer import JediInference
from torchlint.inference.inference_cache import Entry, InferenceCache
from torchlint.analysis.source import SourceText
from torchlint.analysis.values import Kind

ROOT = Path(__file__).resolve().parent.parent
HELPERS = "import torch\n\n\ndef make_weight(n):\n    return torch.randn(n, n)\n"
HELPERS_MODULE = "import torch.nn as nn\n\n\ndef make_weight(n):\n    return nn.Linear(n, n)\n"
MODEL = "from helpers import make_weight\n\nw = make_weight(3)\n"
NET = ("import torch.nn as nn\nfrom helpers import make_weight\n\n\nclass Net(nn.Module):\n"
       "    def __init__(self):\n        super().__init__()\n        self.w = make_weight(3)\n\n"
       "    def forward(self, x):\n        return x @ self.w\n")  # jedi alone sees the tensor


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "helpers.py").write_text(HELPERS)
    (root / "model.py").write_text(MODEL)
    (root / "net.py").write_text(NET)
    return root


def ask(layer: JediInference, path: Path):
    """The jedi layer's answer about `make_weight(3)` in model.py, and the file's inference."""
    text = path.read_text()
    call = ast.parse(text).body[1].value
    inference = layer.for_file(text, str(path), SourceText(text))
    value = inference.classify(call, None)
    inference.finish()
    return value, inference


def cache_entries(cache: InferenceCache):
    return sorted(cache.directory.glob("*/*.json"))


def test_answers_come_back_from_disk_until_what_they_depend_on_changes(tmp_path, layers):
    root = project(tmp_path)
    cache = InferenceCache(tmp_path / "cache")
    value, _ = ask(layers(root, cache=cache), root / "model.py")
    assert value.kind is Kind.TENSOR
    (entry,) = cache_entries(cache)
    recorded = json.loads(entry.read_text())
    assert [d[0] for d in recorded["dependencies"]] == [str(root / "helpers.py")]

    # A second run (a new layer, nothing in memory): the answer is read, jedi is not asked.
    warm = layers(root, cache=cache)
    value, inference = ask(warm, root / "model.py")
    assert value.kind is Kind.TENSOR and inference._script is None

    # The helper now returns a layer: the stored answer is stale, jedi is asked again.
    (root / "helpers.py").write_text(HELPERS_MODULE)
    value, inference = ask(warm, root / "model.py")
    assert value.kind is Kind.MODULE and inference._script is not None
    value, inference = ask(layers(root, cache=cache), root / "model.py")
    assert value.kind is Kind.MODULE and inference._script is None  # the new answer was stored

    # The file itself changed: another text, another entry.
    (root / "model.py").write_text(MODEL + "v = make_weight(4)\n")
    value, inference = ask(warm, root / "model.py")
    assert value.kind is Kind.MODULE and inference._script is not None
    assert len(cache_entries(cache)) == 2  # the stale entry was replaced in place


def test_a_corrupt_or_foreign_entry_is_ignored_and_replaced(tmp_path, layers):
    root = project(tmp_path)
    cache = InferenceCache(tmp_path / "cache")
    ask(layers(root, cache=cache), root / "model.py")
    (entry,) = cache_entries(cache)
    key = answer_key(ast.parse(MODEL).body[1].value)  # make_weight(3)
    layer = layers(root, cache=cache)
    for garbage in (b"", b"{\"answers\": {\"%s\": [\"tens" % key.encode(), b"\x00\xff" * 100, b"[1, 2, 3]",
                    b"{\"answers\": [], \"dependencies\": []}",
                    b"{\"answers\": {\"%s\": \"tensor\"}, \"dependencies\": []}" % key.encode(),
                    b"{\"answers\": {}, \"dependencies\": [[\"x\"]]}"):
        entry.write_bytes(garbage)
        layer.return_cache.clear()
        value, inference = ask(layer, root / "model.py")
        assert value.kind is Kind.TENSOR and inference._script is not None, garbage  # asked again
        assert json.loads(entry.read_text())["answers"][key][0] == "tensor"  # and rewritten


def test_the_cache_folder_is_bounded_and_writes_are_whole(tmp_path):
    cache = InferenceCache(tmp_path / "cache", max_bytes=20_000)
    for number in range(100):
        key = cache.key("env", "/p/m%d.py" % number, "x = %d\n" % number)
        cache.store(key, Entry({"c:1:0:Name": ["tensor", False, None, "x" * 300, False]}), [])
        os.utime(cache._file(key), (1_000_000 + number, 1_000_000 + number))  # last used: in this order
    assert cache.trim() > 0
    sizes = [entry.stat().st_size for entry in cache_entries(cache)]
    assert 0 < sum(sizes) <= 20_000 * 0.8
    assert not list(cache.directory.glob("*/.*.tmp"))  # no temporary file left behind
    newest = cache.key("env", "/p/m99.py", "x = 99\n")
    assert cache.load(newest) is not None  # the oldest went first


def test_an_unwritable_cache_folder_costs_nothing_but_time(tmp_path, layers):
    root = project(tmp_path)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    value, _ = ask(layers(root, cache=InferenceCache(blocker / "cache")), root / "model.py")
    assert value.kind is Kind.TENSOR


def test_a_file_past_its_budget_falls_back_to_names_and_says_so(tmp_path, layers):
    root = project(tmp_path)
    cache = InferenceCache(tmp_path / "cache")
    layer = layers(root, cache=cache, budget=1e-6)
    layer.warm()
    value, inference = ask(layer, root / "model.py")
    assert value is None and inference.note is not None and "budget" in inference.note
    assert list(layer.take_notes()) == [str(root / "model.py")] and layer.take_notes() == {}
    # Kept with its note, under its budget: the same run again asks nothing and says the same.
    (entry,) = cache_entries(cache)
    stored = json.loads(entry.read_text())
    assert stored["note"] == inference.note and stored["budget"] == 1e-6 and stored["answers"] == {}
    asked = []
    layer.new_script = lambda *args, **kwargs: asked.append(args)
    value, again = ask(layer, root / "model.py")
    assert value is None and again.note == inference.note and asked == []
    del layer.new_script
    # The interpreter jedi was talking to may have been stopped mid-question: the next file
    # (with time to spare) is answered by a fresh one; another budget asks again.
    layer.budget = None
    value, inference = ask(layer, root / "model.py")
    assert value.kind is Kind.TENSOR and inference.note is None


def run_check(args, cwd: Path, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchlint", "check", *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **env))


def test_the_budget_from_the_command_line(tmp_path):
    root = project(tmp_path)
    result = run_check(["--infer-budget", "0.000001", "--no-cache", "."], root)
    assert result.returncode in (0, 1), result.stderr
    notes = [line for line in result.stderr.splitlines() if "type inference stopped" in line]
    said = ("torchlint: note: %s: type inference stopped after 1e-06 s (the per-file budget, --infer-budget); "
            "the rest of this file was checked by names alone")
    assert said % "net.py" in notes and len(set(notes)) == len(notes)  # once per file
    assert set(notes) <= {said % name for name in ("net.py", "model.py", "helpers.py")}
    assert "self.w" not in result.stdout  # what only jedi sees was not seen
    assert "self.w" in run_check(["--no-cache", "."], root).stdout
    quiet = run_check(["--infer-budget", "0.000001", "--no-cache", "-q", "."], root)
    assert "type inference stopped" not in quiet.stderr
    for bad in ("-1", "soon", "nan"):
        result = run_check(["--infer-budget", bad, "."], root, timeout=60)
        assert result.returncode == 2 and "--infer-budget" in result.stderr


def test_a_second_run_is_answered_from_the_cache(tmp_path):
    root = project(tmp_path)
    cache = tmp_path / "cache"
    first = run_check(["--format", "json", "."], root, TORCHLINT_CACHE_DIR=str(cache))
    entries = list(cache.glob("v*/*/*.json"))
    assert entries
    stamps = {entry: entry.stat().st_mtime_ns for entry in entries}
    second = run_check(["--format", "json", "."], root, TORCHLINT_CACHE_DIR=str(cache))
    assert json.loads(second.stdout) == json.loads(first.stdout) and second.returncode == first.returncode
    assert set(cache.glob("v*/*/*.json")) == set(entries)
    assert all(entry.read_bytes() for entry in stamps)
    uncached = run_check(["--format", "json", "--no-cache", "."], root, TORCHLINT_CACHE_DIR=str(tmp_path / "unused"))
    assert json.loads(uncached.stdout) == json.loads(first.stdout)
    assert not (tmp_path / "unused").exists()


# -- the progress line ---------------------------------------------------------------------------

SLOW_CHECK = """
import os, sys, time
import torchlint.cli as cli
from torchlint.cli import check, progress, workers
progress.PROGRESS_AFTER = 0.0  # the real threshold is 2 s; these files take a second each
check_file = workers.check_file
def slow(job, state):
    time.sleep(1.0)
    return check_file(job, state)
workers.check_file = slow
if os.environ.get("FAIL_WRITES"):  # each file reports a problem while the line is drawn
    check.write_fixes = lambda checked, display, *mode: display + ": could not be written (test)"
sys.exit(cli.main(sys.argv[1:]))
"""


def check_on_a_terminal(args, cwd: Path, **env):
    """Run `torchlint check` with stderr on a pseudo-terminal: (stdout, what the terminal got)."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", SLOW_CHECK, "check", "--no-infer", "--show-hints", *args],
                               cwd=str(cwd),
                               stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                               env=dict({k: v for k, v in os.environ.items() if k != "CI"}, **env))
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the terminal closed: the process is gone
                    break
                if not chunk:
                    break
                screen += chunk
            elif process.poll() is not None:
                break
        stdout = process.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        os.close(master)
    return stdout.decode(), screen.decode(errors="replace")


def slow_project(tmp_path: Path) -> Path:
    """Three files with a TL301 hint each (printed with --show-hints)."""
    root = tmp_path / "slow"
    root.mkdir()
    for number in range(3):
        (root / ("m%d.py" % number)).write_text("import torch\nx = torch.FloatTensor(3)\n")
    return root


def test_progress_on_a_terminal(tmp_path):
    stdout, screen = check_on_a_terminal([], slow_project(tmp_path))
    assert "torchlint: 0/3 files" in screen or "torchlint: 1/3 files" in screen, screen
    assert any("torchlint: %d/3 files, " % done in screen for done in (1, 2)), screen
    assert not ends_on_the_progress_line(screen)  # wiped at the end
    assert "files, " not in stdout and "TL301" in stdout  # the report itself never carries it


def test_messages_during_the_run_get_lines_of_their_own(tmp_path):
    stdout, screen = check_on_a_terminal([], slow_project(tmp_path), FAIL_WRITES="1")
    errors = [m.start() for m in re.finditer(re.escape("torchlint: error: "), screen)]
    assert len(errors) == 3, screen
    for start in errors:  # the progress line was wiped (or a line ended) just before each
        assert screen[:start].endswith(("\r\x1b[K", "\n")), repr(screen[max(0, start - 40):start + 20])
    assert "files, " in screen and not ends_on_the_progress_line(screen)


def ends_on_the_progress_line(screen: str) -> bool:
    last = [part for part in screen.replace("\n", "\r").split("\r") if part.strip()][-1]
    return re.match(r"torchlint: \d+/\d+ files, ", last) is not None


@pytest.mark.parametrize("args,env", [(["-q"], {}), ([], {"CI": "true"})])
def test_no_progress_when_quiet_or_in_ci(tmp_path, args, env):
    stdout, screen = check_on_a_terminal(args, slow_project(tmp_path), **env)
    assert "files, " not in screen and "TL301" in stdout


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    result = subprocess.run([sys.executable, "-c", SLOW_CHECK, "check", "--no-infer", "--show-hints", "."],
                            cwd=str(slow_project(tmp_path)), capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "CI"})
    assert "files, " not in result.stderr and "TL301" in result.stdout


# -- no jedi interpreter crosses a fork ----------------------------------------------------------

def children() -> set:
    """Processes this one started that are still there (Linux: /proc/<pid>/task/*/children)."""
    found = set()
    for task in Path("/proc/%d/task" % os.getpid()).iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_no_jedi_interpreter_in_the_parent_when_the_workers_fork(tmp_path, monkeypatch, capsys):
    root = project(tmp_path)
    for number in range(workers.PARALLEL_MIN_FILES + 2):
        (root / ("net%d.py" % number)).write_text(MODEL)
    before = children()
    at_fork = []
    real_pool = workers.ProcessPoolExecutor
    closed = []  # the parent's live layers each time it ended them
    real_close = ProcessState.close_layers

    def pool(*args, **kwargs):
        at_fork.append(children() - before)
        return real_pool(*args, **kwargs)

    def close_layers(state):
        closed.append(sum(layer is not None for layer in state.layers.values()))
        real_close(state)

    monkeypatch.setattr(workers, "ProcessPoolExecutor", pool)
    monkeypatch.setattr(ProcessState, "close_layers", close_layers)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.chdir(root)
    # -v starts a jedi layer in this process to describe it, before the workers start.
    status = cli.main(["check", "-v", "--no-cache", "."])
    err = capsys.readouterr().err
    assert status in (0, 1), err
    assert "jedi inference with" in err and "checked %d files" % len(list(root.glob("*.py"))) in err
    assert closed[0] == 1  # the parent did start one, and ended it before forking
    assert at_fork == [set()]


def test_a_question_cut_short_leaves_no_answer_behind(tmp_path, layers, monkeypatch):
    """The budget can stop jedi in the middle of resolving a class in another file: that class is
    then unknown for now, not remembered as "not a Module"."""
    from torchlint.inference.jedi_access import BudgetSpent
    root = project(tmp_path)
    (root / "blocks.py").write_text("import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n")
    layer = layers(root)
    resolve = layer._resolve_class
    calls = []

    def interrupted(*args):
        calls.append(args)
        if len(calls) == 1:
            raise BudgetSpent()
        return resolve(*args)

    monkeypatch.setattr(layer, "_resolve_class", interrupted)
    with pytest.raises(BudgetSpent):
        layer.class_is_module(str(root / "blocks.py"), 4)
    assert layer.class_is_module(str(root / "blocks.py"), 4) is True and len(calls) == 2


NAMES_DECIDE = ("import collections\nimport torch\nimport torch.nn as nn\n"
                "from collections import defaultdict, deque\n\n"
                "a = list(range(3))\nb = defaultdict(deque)\nc = collections.OrderedDict()\nd = torch\ne = nn\n"
                "f = tuple(a)\n")
SHADOWED = "import torch\n\n\ndef list(n):\n    return torch.zeros(n)\n\n\na = list(3)\n"


def assigned_values(text: str):
    return [stmt.value for stmt in ast.parse(text).body if isinstance(stmt, ast.Assign)]


def test_what_names_decide_is_not_asked_and_is_what_jedi_would_say(tmp_path, layers):
    root = project(tmp_path)
    (root / "plain.py").write_text(NAMES_DECIDE)
    (root / "shadowed.py").write_text(SHADOWED)
    layer = layers(root)
    inference = layer.for_file(NAMES_DECIDE, str(root / "plain.py"), SourceText(NAMES_DECIDE))
    values = assigned_values(NAMES_DECIDE)
    assert [inference.classify(node, None) for node in values] == [None] * len(values)
    assert inference._script is None  # no jedi Script: nothing was asked
    assert [inference._classify(node) for node in values] == [None] * len(values)  # jedi's own answers

    # A builtin's name bound in the file is the file's own: jedi is asked, and sees the tensor.
    inference = layer.for_file(SHADOWED, str(root / "shadowed.py"), SourceText(SHADOWED))
    (call,) = assigned_values(SHADOWED)
    assert inference.classify(call, None).kind is Kind.TENSOR and inference._script is not None


BASES_NAMES_DECIDE = ("import torch\nfrom typing_extensions import Protocol\nfrom reexport import Generator\n\n\n"
                      "class A(str):\n    pass\n\n\nclass B(torch._C.Generator):\n    pass\n\n\n"
                      "class C(Protocol):\n    pass\n\n\nclass D(Generator):\n    pass\n")
REEXPORT = "import sys\n\nif sys.platform:\n    from torch._C import Generator\n"  # bound under a condition
BASE_SHADOWED = "import torch.nn as nn\n\n\nclass str(nn.Module):\n    pass\n\n\nclass A(str):\n    pass\n"


def class_bases(text: str):
    return [(node, node.bases[0]) for node in ast.parse(text).body if isinstance(node, ast.ClassDef)]


def test_bases_names_decide_are_not_asked_and_are_what_jedi_would_say(tmp_path, layers):
    root = project(tmp_path)
    (root / "bases.py").write_text(BASES_NAMES_DECIDE)
    (root / "reexport.py").write_text(REEXPORT)
    layer = layers(root)
    inference = layer.for_file(BASES_NAMES_DECIDE, str(root / "bases.py"), SourceText(BASES_NAMES_DECIDE))
    bases = class_bases(BASES_NAMES_DECIDE)
    assert [inference.is_module_base(None, base) for _, base in bases] == [False] * 4
    assert inference._script is None  # no jedi Script: nothing was asked
    assert [layer.base_is_module(inference.script, base, BASES_NAMES_DECIDE, 1, set())
            for _, base in bases] == [False] * 4  # jedi's own answers

    # A builtin's name that the file binds is the file's: here a Module.
    (root / "shadowed.py").write_text(BASE_SHADOWED)
    inference = layer.for_file(BASE_SHADOWED, str(root / "shadowed.py"), SourceText(BASE_SHADOWED))
    (_, base), = [(node, base) for node, base in class_bases(BASE_SHADOWED) if node.name == "A"]
    assert inference.is_module_base(None, base) is True


# A package's lazy __init__ (diffusers' loaders, transformers' models): names bound only by imports
# under a condition. Whether jedi counts them depends on what it makes of the condition.
LAZY_INIT = ("from typing import TYPE_CHECKING\n\n"
             "if TYPE_CHECKING:\n    from .mixins import LoaderMixin, LayerMixin\n"
             "else:\n    import sys\n\n    sys.modules[__name__] = sys.modules[__name__]\n")
MIXINS = "import torch.nn as nn\n\n\nclass LoaderMixin:\n    pass\n\n\nclass LayerMixin(nn.Module):\n    pass\n"
FALLBACK = ("try:\n    from .mixins import LoaderMixin as Loader\n"
            "except ImportError:\n    from .plain import Loader\n\n"
            "try:\n    from .mixins import LoaderMixin as Missing\nexcept ImportError:\n    Missing = None\n")
USES_LAZY = ("from pkg import LoaderMixin, LayerMixin\nfrom pkg.fallback import Loader, Missing\n\n\n"
             "class A(LoaderMixin):\n    pass\n\n\nclass B(Loader):\n    pass\n\n\n"
             "class C(LayerMixin):\n    pass\n\n\nclass D(Missing):\n    pass\n")


def test_a_base_imported_under_a_condition_is_settled_by_the_files_only_when_no_import_is_a_module(tmp_path, layers):
    """Imports under a condition (and nothing else) that are none of them a Module: "no" whichever
    jedi counts. One that is a Module, or another binding (`Missing = None`), is left to jedi."""
    root = project(tmp_path)
    (root / "pkg").mkdir()
    for name, text in (("__init__", LAZY_INIT), ("mixins", MIXINS), ("fallback", FALLBACK),
                       ("plain", "class Loader:\n    pass\n")):
        (root / "pkg" / ("%s.py" % name)).write_text(text)
    (root / "uses.py").write_text(USES_LAZY)
    layer = layers(root)
    inference = layer.for_file(USES_LAZY, str(root / "uses.py"), SourceText(USES_LAZY))
    bases = dict((node.name, base) for node, base in class_bases(USES_LAZY))
    assert [inference._base_from_files(bases[name]) for name in "ABCD"] == [False, False, None, None]
    assert [inference.is_module_base(None, bases[name]) for name in "AB"] == [False, False]
    assert inference._script is None  # no jedi Script: nothing was asked
    jedi = [layer.base_is_module(inference.script, bases[name], USES_LAZY, 1, set()) for name in "ABCD"]
    assert jedi[:2] == [False, False]  # jedi's own answers, where the files gave theirs
    assert [inference.is_module_base(None, bases[name]) for name in "CD"] == jedi[2:]


# A module that names its classes again (`PreTrainedTokenizer = PythonBackend` in transformers,
# `LayerNorm = nn.LayerNorm` in research code): a base imported by the other name.
ALIASES = ("import torch.nn as nn\nfrom pkg.mixins import LoaderMixin\n\n\nclass Block(nn.Module):\n    pass\n\n\n"
           "Layer = Block\nNorm = nn.LayerNorm\nPlain = LoaderMixin\n"
           "Rebound = LoaderMixin\nEarly = Rebound\nRebound = Block\n")
USES_ALIASES = ("import torch\nfrom aliases import Layer, Norm, Plain, Early\n\n\n"
                "class A(Layer):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.ones(3)\n\n"
                "    def forward(self, x):\n        return x * self.w\n\n\n"
                "class B(Norm):\n    pass\n\n\nclass C(Plain):\n    pass\n\n\nclass D(Early):\n    pass\n")


def test_a_base_imported_by_another_name_its_module_gives_it_is_settled_by_the_files(tmp_path, layers):
    """``Name = OtherName`` at the top of a module: the other name's class, when nothing binds that
    name again after it (``Early``: its value depends on the order, which jedi is asked about)."""
    root = project(tmp_path)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mixins.py").write_text(MIXINS)
    (root / "aliases.py").write_text(ALIASES)
    (root / "uses.py").write_text(USES_ALIASES)
    layer = layers(root)
    inference = layer.for_file(USES_ALIASES, str(root / "uses.py"), SourceText(USES_ALIASES))
    bases = dict((node.name, base) for node, base in class_bases(USES_ALIASES))
    assert [inference._base_from_files(bases[name]) for name in "ABCD"] == [True, True, False, None]
    assert inference._script is None
    # The rules see A as the Module it is: its plain tensor is found.
    result = subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-cache", "--select", "TL101",
                             "--format", "json", "uses.py"], cwd=root, capture_output=True, text=True, timeout=300)
    assert [(f["code"], f["location"]["row"]) for f in json.loads(result.stdout)] == [("TL101", 8)], result.stderr


NOT_INSTALLED = ("from transformers_not_installed.models.bert import BertModel\n"
                 "from pkg.missing_module import Layer\n\n\n"
                 "class A(BertModel):\n    pass\n\n\nclass B(Layer):\n    pass\n")


def test_a_base_from_a_package_found_nowhere_is_no_module_as_jedi_says_without_asking(tmp_path, layers):
    """An absolute import of a package that no folder of the search path holds (transformers' own
    modules importing `transformers.models...` where it is not installed): jedi finds no class
    there. A package that exists but lacks the module is still left to jedi."""
    root = project(tmp_path)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "uses.py").write_text(NOT_INSTALLED)
    layer = layers(root)
    inference = layer.for_file(NOT_INSTALLED, str(root / "uses.py"), SourceText(NOT_INSTALLED))
    bases = dict((node.name, base) for node, base in class_bases(NOT_INSTALLED))
    assert [inference._base_from_files(bases[name]) for name in "AB"] == [False, None]
    assert inference._script is None
    # jedi's own: no definition at all (None: whether it is a Module is not known; no Module either way)
    assert layer.base_is_module(inference.script, bases["A"], NOT_INSTALLED, 1, set()) is None


BLOCKS = "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n"
USES_BLOCK = ("import torch\nfrom z_blocks import Block\n\n\nclass Net(Block):\n    def __init__(self):\n"
              "        super().__init__()\n        self.w = torch.zeros(3)\n")


def test_a_file_read_for_another_files_bases_is_not_parsed_again_when_it_is_checked(tmp_path, monkeypatch, capsys):
    """A worker often reads a file to settle another's bases before it checks that file itself:
    the check takes the tree the read made while that tree lives (parsing._LIVE_TREES)."""
    root = project(tmp_path)
    # Texts no earlier test of this process parsed (a tree of the same text may still live).
    blocks, uses_block = BLOCKS + "# %s\n" % root, USES_BLOCK + "# %s\n" % root
    (root / "a_net.py").write_text(uses_block)
    (root / "z_blocks.py").write_text(blocks)
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *args, **kwargs: parsed.append(text) or real_parse(text, *args, **kwargs))
    monkeypatch.chdir(root)
    assert cli.main(["check", "--no-cache", "--format", "json", "--select", "TL101", "a_net.py", "z_blocks.py"]) == 1
    # Net's base was settled from z_blocks.py, read before z_blocks.py itself was checked.
    found = [(Path(f["filename"]).name, f["code"]) for f in json.loads(capsys.readouterr().out)]
    assert found == [("a_net.py", "TL101")]
    assert parsed.count(blocks) == 1
    assert parsed.count(uses_block) == 1


def test_jedi_leaves_a_paused_collector_paused():
    import gc

    import parso.cache
    from torchlint.collection import paused as gc_paused
    was = gc.isenabled()
    with gc_paused():
        parso.cache.gc.disable()  # what parso does around loading a pickled tree
        parso.cache.gc.enable()
        assert not gc.isenabled()
    assert gc.isenabled() == was
    gc.enable()
    parso.cache.gc.disable()
    parso.cache.gc.enable()
    assert gc.isenabled()


def test_a_cli_layer_takes_the_warm_up_out_of_later_collections(tmp_path, layers):
    import gc
    root = project(tmp_path)
    gc.unfreeze()  # whatever an in-process CLI run of another test froze
    try:
        quiet = layers(root)
        quiet.warm()
        assert gc.get_freeze_count() == 0  # a layer in a long-lived process leaves the collector alone
        cli_layer = layers(root, freeze_after_warm=True)
        cli_layer.warm()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_jedis_interpreter_reads_torchs_stubs_and_never_imports_it(tmp_path, layers):
    root = project(tmp_path)
    layer = layers(root)
    layer.warm()  # jedi's trip into torch: torch.zeros, nn.Parameter
    value, _ = ask(layer, root / "model.py")
    assert value.kind is Kind.TENSOR  # answered from torch's sources and stubs
    process = layer.environment._subprocess._process
    mapped = Path("/proc/%d/maps" % process.pid).read_text()
    assert "libtorch" not in mapped and "torch/_C" not in mapped  # import torch._C would load them


def _dive(depth: int) -> int:
    return 0 if depth == 0 else _dive(depth - 1) + 1


def _page_faults_diving(dives: int) -> int:
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(dives):
        _dive(600)  # some 60 KiB of frames: across at least one border between CPython's frame chunks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(sys.version_info < (3, 11) or not sys.platform.startswith("linux"),
                    reason="frames live in mapped chunks from CPython 3.11; page faults counted as on Linux")
def test_a_question_recursing_across_a_frame_chunk_does_not_map_memory_at_each_step():
    from torchlint.inference.jedi_access import with_frame_room
    without = _page_faults_diving(3000)  # each dive maps a chunk and unmaps it on the way up
    with_room = with_frame_room(lambda: _page_faults_diving(3000))
    assert without >= 3000
    assert with_room * 10 < without
