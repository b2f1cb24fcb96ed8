"""The jedi layer asks only what can change a finding, and bounds what a worker keeps (issue 23)."""
import ast
import os
import textwrap

import pytest

from torchlint.inference import project_answers
from torchlint.inference.layer import JediInference
from torchlint.engine import check_source


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _no_jedi(layer, monkeypatch):
    """Fail if the layer asks jedi about a base class (what files tell must be enough)."""
    def asked(*args, **kwargs):
        raise AssertionError("jedi was asked")
    monkeypatch.setattr(layer, "base_is_module", asked)


def test_a_class_attribute_assigned_after_the_class_leaves_the_name_bound_to_it(tmp_path, monkeypatch):
    # transformers: `PreTrainedModel.push_to_hub = copy_func(PreTrainedModel.push_to_hub)` after the
    # class. The name still holds the class: the base is read from the file, jedi is not asked.
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": """
            import torch.nn as nn

            class Base(nn.Module):
                def push(self):
                    pass

            class Plain:
                pass

            Base.push = staticmethod(Base.push)
            Plain.x: int = 1
            if Base.push.__doc__ is not None:
                Base.push.__doc__ = "pushed"
            """,
        "pkg/model.py": """
            from .base import Base, Plain
            """,
    })
    layer = JediInference(str(tmp_path), share_states=True)
    _no_jedi(layer, monkeypatch)
    model = str(tmp_path / "pkg" / "model.py")
    imports = [n for n in ast.walk(ast.parse((tmp_path / "pkg" / "model.py").read_text()))
               if isinstance(n, ast.ImportFrom)]
    assert layer.base_from_files(model, imports, ast.Name(id="Base"), 1, set()) is True
    assert layer.base_from_files(model, imports, ast.Name(id="Plain"), 1, set()) is False


@pytest.mark.parametrize("rebinding", ["Base = make()", "Base, other = make()", "del Base", "(Base := make())",
                                       "Base: type = make()"])
def test_a_name_rebound_after_its_class_is_left_to_jedi(tmp_path, rebinding):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": "import torch.nn as nn\n\nclass Base(nn.Module):\n    pass\n\n%s\n" % rebinding,
        "pkg/model.py": "from .base import Base\n",
    })
    layer = JediInference(str(tmp_path), share_states=True)
    model = str(tmp_path / "pkg" / "model.py")
    imports = [n for n in ast.walk(ast.parse("from .base import Base\n")) if isinstance(n, ast.ImportFrom)]
    assert layer.base_from_files(model, imports, ast.Name(id="Base"), 1, set()) is None  # files cannot tell


# -- parameters jedi infers nothing for --------------------------------------------------------
SKIPPED = '''
import torch
import torch.nn as nn


def helper(q):
    """q (`Block`): named in Google's style, which jedi does not read a type from"""
    return q.w


class Block(nn.Module):
    def __init__(self, config, other=None, *, kw=None):
        super().__init__()
        self.a = config.hidden_size
        self.b = config.sub.make()
        self.c = getattr(config, "scale", 1.0)
        self.d = other.weight
        self.e = kw.bias
'''

ASKED = '''
import torch
import torch.nn as nn


class Config:
    def __init__(self):
        self.w = torch.zeros(3)


def helper(p):
    """:type p: Config"""
    return p.w


class Block(nn.Module):
    def __init__(self, config: Config, other=Config(), *, kw=None):
        super().__init__()
        self.a = config.w
        self.b = other.w
        self.c = kw.__class__
        self.d = self.__class__

    @staticmethod
    def build(p):
        return p.w

    def forward(self, x, y):
        for y in x:
            y.w
        return [z.w for z in x]
'''


def _inference(tmp_path, text):
    from torchlint.analysis.context import FileContext
    from torchlint.analysis.parsing import parse
    path = tmp_path / "mod.py"
    path.write_text(text)
    layer = JediInference(str(tmp_path), share_states=True)
    tree, _ = parse(text, str(path))
    ctx = FileContext(text, str(path), tree, layer)
    return ctx, ctx.inference


def _questions(tree, names):
    """The attribute and call nodes whose text is one of ``names``."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Call)) and ast.unparse(n) in names]


def test_attributes_of_a_parameter_jedi_cannot_infer_are_not_asked_and_jedi_agrees(tmp_path, monkeypatch):
    monkeypatch.setattr(project_answers, "_NUMPYDOC_IMPORTABLE", False)  # (with it, jedi reads numpydoc's form too)
    ctx, inference = _inference(tmp_path, SKIPPED)
    nodes = _questions(ctx.tree, {"config.hidden_size", "config.sub.make()", "getattr(config, 'scale', 1.0)",
                                  "other.weight", "kw.bias", "q.w"})
    assert len(nodes) == 6
    for node in nodes:
        assert inference._of_an_unknowable_parameter(node), ast.unparse(node)
        assert inference._classify(node) is None, ast.unparse(node)  # jedi's own answer: unknown


def test_parameters_jedi_can_infer_are_asked(tmp_path):
    ctx, inference = _inference(tmp_path, ASKED)
    nodes = _questions(ctx.tree, {"config.w", "other.w", "kw.__class__", "self.__class__", "p.w", "y.w", "z.w"})
    assert len(nodes) == 8  # p.w twice: a docstring typing it as jedi reads, a decorated function
    for node in nodes:
        assert not inference._of_an_unknowable_parameter(node), ast.unparse(node)
    a = next(n for n in nodes if ast.unparse(n) == "config.w")
    assert inference._classify(a).kind.value == "tensor"  # what a skip there would have lost


def test_skipping_those_questions_changes_no_finding(tmp_path, monkeypatch):
    from torchlint.inference import layer as inference_module
    text = SKIPPED + "\n    def forward(self, x):\n        return x * self.a + self.b + self.c + self.d + self.e\n"
    path = tmp_path / "mod.py"
    path.write_text(text)
    skipping = check_source(text, str(path), inference=JediInference(str(tmp_path), share_states=True)).findings
    monkeypatch.setattr(inference_module.FileInference, "_of_an_unknowable_parameter", lambda self, node: False)
    asking = check_source(text, str(path), inference=JediInference(str(tmp_path), share_states=True)).findings
    assert skipping == asking


# -- memory ----------------------------------------------------------------------------------------
def test_a_worker_past_its_memory_limit_drops_jedi_state_and_finds_the_same(tmp_path, monkeypatch):
    from torchlint.inference import layer as inference_module
    # (What make() returns is for jedi to say: names alone do not read a lambda.)
    text = "import torch\nimport torch.nn as nn\n\n\nmake = lambda: torch.zeros(3)\n\n\n" \
           "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = make()\n\n" \
           "    def forward(self, x):\n        return x * self.w\n"
    paths = []
    for index in range(3):
        path = tmp_path / ("m%d.py" % index)
        path.write_text(text)
        paths.append(str(path))
    mib, limit, growth = 2 ** 20, 400 * 2 ** 20, inference_module.TRIM_GROWTH
    resident = [100 * mib]  # what the process holds, as trim_memory reads it
    monkeypatch.setattr(inference_module, "resident_memory", lambda: resident[0])
    layer = JediInference(str(tmp_path), share_states=True)
    first = check_source(text, paths[0], inference=layer).findings
    assert [f.code for f in first] == ["TL101"]
    assert layer._states
    assert not layer.trim_memory(limit)  # under the limit: kept
    assert layer._states
    resident[0] = 500 * mib
    assert layer.trim_memory(limit)  # past it: dropped
    assert not layer._states and not layer._file_cache and not layer._warmed.is_set()
    assert check_source(text, paths[1], inference=layer).findings == first  # a fresh state, the same answer
    resident[0] = 500 * mib + growth // 2
    assert not layer.trim_memory(limit)  # not grown enough since: what the trim freed is being reused
    resident[0] = 500 * mib + growth + 1
    assert layer.trim_memory(limit)


def test_a_worker_past_its_memory_limit_drops_many_read_files_first_and_keeps_jedis_state(tmp_path, monkeypatch):
    # Trees of read files hold no cycles: dropping them needs no collection (2-3 s a worker), and
    # jedi keeps what it learnt. Few of them, or grown past the limit again since they were
    # dropped (jedi's states grow too): the states go, as before.
    from torchlint.inference import layer as inference_module, project_files
    monkeypatch.setattr(project_files, "READ_FILES_KEPT", 8)
    mib, limit, growth = 2 ** 20, 400 * 2 ** 20, inference_module.TRIM_GROWTH
    resident = [100 * mib]
    monkeypatch.setattr(inference_module, "resident_memory", lambda: resident[0])
    # (What make() returns is for jedi to say: names alone do not read a lambda.)
    text = "import torch\nimport torch.nn as nn\n\n\nmake = lambda: torch.zeros(3)\n\n\n" \
           "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = make()\n\n" \
           "    def forward(self, x):\n        return x * self.w\n"
    (tmp_path / "m.py").write_text(text)
    layer = JediInference(str(tmp_path), share_states=True)
    check_source(text, str(tmp_path / "m.py"), inference=layer)
    for name in "abc":
        (tmp_path / (name + ".py")).write_text("class %s:\n    pass\n" % name.upper())
        layer.read_file(str(tmp_path / (name + ".py")))
    assert layer._states and len(layer._file_cache) == 3
    resident[0] = 500 * mib
    assert not layer.trim_memory(limit)  # nothing for the caller to collect
    assert not layer._file_cache and layer._states and layer._warmed.is_set()
    for name in "abc":  # many again, but what grew since the files were dropped is jedi's
        layer.read_file(str(tmp_path / (name + ".py")))
    resident[0] = 500 * mib + growth + 1
    assert layer.trim_memory(limit)
    assert not layer._states and not layer._file_cache and not layer._warmed.is_set()
    check_source(text, str(tmp_path / "m.py"), inference=layer)
    layer.read_file(str(tmp_path / "a.py"))  # one file: under a quarter of READ_FILES_KEPT
    resident[0] = 500 * mib + 2 * growth + 2
    assert layer.trim_memory(limit)  # few read files: the states go
    assert not layer._states


def test_a_worker_forked_from_a_large_process_trims_once_it_has_grown(tmp_path, monkeypatch):
    from torchlint.inference import layer as inference_module
    mib, limit, growth = 2 ** 20, 400 * 2 ** 20, inference_module.TRIM_GROWTH
    resident = [600 * mib]  # born past the limit (a worker forked from a large process)
    monkeypatch.setattr(inference_module, "resident_memory", lambda: resident[0])
    layer = JediInference(str(tmp_path), share_states=True)
    assert not layer.trim_memory(limit)
    resident[0] = 600 * mib + growth + 1
    assert layer.trim_memory(limit)


def test_a_checked_file_leaves_no_tree_in_parsos_cache(tmp_path):
    import parso.cache
    text = "import torch\n\n\ndef make():\n    return torch.zeros(3)\n\n\nx = make()\ny = x.cuda()\n"
    path = tmp_path / "script.py"
    path.write_text(text)
    layer = JediInference(str(tmp_path), share_states=True)
    check_source(text, str(path), inference=layer)
    assert not any(str(p) == str(path) for cache in parso.cache.parser_cache.values() for p in cache)


def test_a_run_keeps_more_read_files_than_the_language_server_whose_memory_nothing_trims(tmp_path, monkeypatch):
    from torchlint.inference import project_files
    monkeypatch.setattr(project_files, "READ_FILES_KEPT", 3)
    monkeypatch.setattr(project_files, "READ_FILES_KEPT_UNTRIMMED", 2)
    for name in "abc":
        (tmp_path / (name + ".py")).write_text("class %s:\n    pass\n" % name.upper())
    kept = []
    for shared in (True, False):
        layer = JediInference(str(tmp_path), share_states=shared)
        for name in "abc":
            layer.read_file(str(tmp_path / (name + ".py")))
        kept.append(len(layer._file_cache))
    assert kept == [3, 2]


def test_read_files_are_kept_least_recently_used_first(tmp_path, monkeypatch):
    from torchlint.inference import project_files
    monkeypatch.setattr(project_files, "READ_FILES_KEPT", 2)
    layer = JediInference(str(tmp_path), share_states=True)
    for name in "abc":
        (tmp_path / (name + ".py")).write_text("class %s:\n    pass\n" % name.upper())
    layer.read_file(str(tmp_path / "a.py"))
    layer.read_file(str(tmp_path / "b.py"))
    layer.read_file(str(tmp_path / "a.py"))
    layer.read_file(str(tmp_path / "c.py"))
    assert list(layer._file_cache) == [str(tmp_path / "a.py"), str(tmp_path / "c.py")]


def test_a_file_a_check_parsed_lately_is_read_from_that_tree(tmp_path):
    # A model file reads its folder's configuration file, which the worker has often just checked.
    from torchlint.analysis import parsing
    text = "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n"
    (tmp_path / "blocks.py").write_text(text)
    checked, _ = parsing.parse(text, "blocks.py")  # as a check of it did (the CLI's path, relative)
    layer = JediInference(str(tmp_path), share_states=True)
    assert layer.read_file(str(tmp_path / "blocks.py")).tree is checked
    (tmp_path / "other.py").write_text(text + "\n")
    assert layer.read_file(str(tmp_path / "other.py")).tree is not checked  # another text: parsed


def _codes_written(layer, path, text):
    """The codes of what a check of ``text``, written to ``path``, finds."""
    path.write_text(text)
    return [f.code for f in check_source(text, str(path), inference=layer).findings]


def test_a_name_a_module_gave_is_not_parsed_again_once_its_tree_was_dropped(tmp_path, monkeypatch):
    # Base resolution keeps a module's answer for each name it was asked: transformers' model files
    # ask ModelOutput's module about the same name in every folder, long after its tree was dropped.
    # "Cannot tell" is kept too (Maybe, bound under a condition: jedi decides).
    from torchlint.inference import project_files
    monkeypatch.setattr(project_files, "READ_FILES_KEPT", 1)
    (tmp_path / "outputs.py").write_text("import torch.nn as nn\n\n\nclass Output(dict):\n    pass\n\n\n"
                                         "class Layer(nn.Module):\n    pass\n\n\ntry:\n"
                                         "    from torch.nn import Identity as Maybe\nexcept ImportError:\n"
                                         "    class Maybe(nn.Module):\n        pass\n")
    layer = JediInference(str(tmp_path), share_states=True)
    parsed = []  # (file, tree) each time a tree was read
    read_file = layer.read_file

    def reading(path):
        read = read_file(path)
        if (os.path.basename(path), read.tree) not in parsed:
            parsed.append((os.path.basename(path), read.tree))
        return read
    monkeypatch.setattr(layer, "read_file", reading)
    findings = []
    for index in range(3):
        (tmp_path / ("other%d.py" % index)).write_text("x = 1\n")
        text = ("import torch.nn as nn\nfrom outputs import Output, Layer, Maybe\nfrom other%d import x\n\n\n"
                "class Result(Output):\n    pass\n\n\nclass Block(Layer):\n    def __init__(self):\n"
                "        super().__init__()\n        self.layers = [nn.Linear(2, 2)]\n\n\n"
                "class Wrapped(Maybe):\n    def __init__(self):\n"
                "        super().__init__()\n        self.layers = [nn.Linear(2, 2)]\n") % index
        findings.append(_codes_written(layer, tmp_path / ("model%d.py" % index), text))
        layer.read_file(str(tmp_path / ("other%d.py" % index)))  # outputs.py's tree is dropped
    assert findings == [["TL102", "TL102"]] * 3  # Block and Wrapped (jedi's answer) are Modules; Result is not
    assert [name for name, _ in parsed].count("outputs.py") == 1


def test_parso_keeps_the_project_modules_across_files_until_a_trim(tmp_path, monkeypatch):
    """jedi parses a project module once per run, however many files import others in between
    (70 here), and a trim (past the memory limit) drops the trees; the answers are the same."""
    import parso.cache
    from torchlint.inference import layer as inference_module
    mib = 2 ** 20
    resident = [100 * mib]  # what the process holds, as trim_memory reads it
    monkeypatch.setattr(inference_module, "resident_memory", lambda: resident[0])
    modules = 70
    for index in range(modules):
        (tmp_path / ("helpers%d.py" % index)).write_text("import torch\n\n\ndef make():\n    return torch.zeros(3)\n")
    layer = JediInference(str(tmp_path), share_states=True)

    def kept():
        return sorted(p.name for cache in parso.cache.parser_cache.values() for p in cache
                      if p is not None and str(p).startswith(str(tmp_path)))
    codes, trees = [], []
    for index in list(range(modules)) + [0]:
        text = ("import torch.nn as nn\nfrom helpers%d import make\n\n\nclass M(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n        self.w = make()\n\n"
                "    def forward(self, x):\n        return x * self.w\n") % index
        codes.append(_codes_written(layer, tmp_path / ("model%d.py" % index), text))
        trees.append(next(cache[tmp_path / "helpers0.py"].node for cache in parso.cache.parser_cache.values()
                          if tmp_path / "helpers0.py" in cache))
    assert kept() == sorted("helpers%d.py" % index for index in range(modules))  # no model file's own tree
    assert trees[-1] is trees[0]  # helpers0.py, imported again by the last file, was not parsed again
    resident[0] = 2 ** 40
    assert not layer.trim_memory(512 * mib)  # first the 70 files read for base resolution
    assert not layer._file_cache and len(kept()) == modules
    resident[0] += inference_module.TRIM_GROWTH + 1
    assert layer.trim_memory(512 * mib)
    assert kept() == []
    assert _codes_written(layer, tmp_path / "model0.py", text) == codes[0]
    assert codes == [["TL101"]] * (modules + 1)


def test_no_question_about_a_base_once_another_base_makes_the_class_a_module(tmp_path, monkeypatch):
    """``class Head(Base, Mixin)``: once ``Base`` is known to be a Module (here through a class of
    the same file whose own base another file settles), what ``Mixin`` is cannot change the answer."""
    (tmp_path / "backbone.py").write_text("import torch.nn as nn\n\n\nclass Backbone(nn.Module):\n    pass\n")
    text = ("from backbone import Backbone\nfrom mixins import Mixin\n\n\nclass Base(Backbone):\n    pass\n\n\n"
            "class Head(Base, Mixin):\n    def __init__(self):\n        super().__init__()\n        self.w = make()\n")
    path = tmp_path / "model.py"
    path.write_text(text)
    from torchlint.analysis.context import FileContext
    from torchlint.inference.file_inference import FileInference
    asked = []
    original = FileInference.is_module_base
    monkeypatch.setattr(FileInference, "is_module_base",
                        lambda self, info, base: asked.append(ast.unparse(base)) or original(self, info, base))
    ctx = FileContext(text, str(path), ast.parse(text), JediInference(str(tmp_path), share_states=True))
    assert ctx.classes["Head"].is_module and ctx.classes["Base"].is_module
    assert asked == ["Backbone"]


# -- questions no answer could turn into a finding -------------------------------------------------
class _SaysEverything:
    """A jedi layer that answers ``answer`` to every question and records what it was asked."""

    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def for_file(self, text, path, source, tree=None, nodes=None):
        return self

    def is_module_base(self, info, base):
        return False

    def classify(self, node, scope):
        self.asked.append((node.lineno, ast.unparse(node)))
        return self.answer

    def unchecked_classes(self, classes):
        return []

    # The project's other files (FileAnswers' cross-file questions): none here, as by names alone.
    def base_class(self, base):
        return None

    def used_elsewhere(self, attr, class_name):
        return False

    def subclassed_elsewhere(self, name):
        return False

    def function_in_project(self, func, method=None, within=None):
        return None

    def finish(self):
        pass


def _answers():
    from torchlint.analysis.values import OTHER, Kind, Value
    return [Value(Kind.TENSOR), Value(Kind.PARAMETER), Value(Kind.MODULE, module_class="torch.nn.Linear"),
            Value(Kind.BUFFER), OTHER, None]


GATED = '''
import torch
import torch.nn as nn


def helper():
    return something()


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.size = config.hidden_size          # only builds a layer here: quiet whatever it holds
        self.proj = nn.Linear(self.size, self.size)
        self.table = helper()                   # forward reads its shape only: quiet
        self.scale = helper()                   # forward computes with it: asked
        self.grad = helper().requires_grad_()   # may require grad: asked
        self.moved = helper().cuda()            # a Parameter moved requires grad: asked
        self.layers = config.make_layers()      # a call holds one object, never a list of layers
        self.other = config.other

    def forward(self, x):
        print(self.table.shape, self.grad.shape, self.moved.shape)
        return self.proj(x) * self.scale
'''


def test_tl101_asks_only_where_a_tensor_could_make_a_finding(tmp_path):
    path = tmp_path / "block.py"
    path.write_text(GATED)
    layer = _SaysEverything(_answers()[0])
    found = check_source(GATED, str(path), inference=layer).findings
    asked = {line for line, _ in layer.asked}
    assert 13 not in asked and 15 not in asked  # self.size, self.table
    assert {16, 17, 18} <= asked  # self.scale, self.grad and self.moved (helper() in each)
    tl101 = {(f.range.start.line, f.severity.value) for f in found if f.code == "TL101"}
    assert tl101 == {(16, "warning"), (17, "error")}  # self.scale, self.grad
    shown = _SaysEverything(_answers()[0])
    from torchlint.engine import CheckOptions
    check_source(GATED, str(path), CheckOptions(show_all=True), inference=shown)
    assert {13, 15} <= {line for line, _ in shown.asked}  # everything shown: a quiet finding is one too


@pytest.mark.parametrize("answer", range(len(_answers())))
def test_questions_left_unasked_change_no_finding(tmp_path, monkeypatch, answer):
    # Whatever the jedi layer answers, the findings are those of a check that asks everything: on
    # the text above and on every rule fixture.
    from torchlint.rules import tl101_unregistered_tensor
    fixtures = os.path.join(os.path.dirname(__file__), "fixtures", "rules")
    texts = [GATED] + [open(os.path.join(fixtures, name), encoding="utf-8").read()
                       for name in sorted(os.listdir(fixtures)) if name.endswith(".py")]
    value = _answers()[answer]
    skipped = 0
    for index, text in enumerate(texts):
        path = tmp_path / ("m%d.py" % index)
        path.write_text(text)
        gated = _SaysEverything(value)
        found = check_source(text, str(path), inference=gated).findings
        with monkeypatch.context() as patched:
            patched.setattr(tl101_unregistered_tensor, "_quiet_whatever_inferred", lambda *args: False)
            asking = _SaysEverything(value)
            assert check_source(text, str(path), inference=asking).findings == found, index
        skipped += len(asking.asked) - len(gated.asked)
    assert skipped > 0  # (the comparison is not empty)


@pytest.mark.parametrize("answer", range(len(_answers())))
def test_a_call_or_an_attribute_is_never_a_container_whatever_jedi_answers(tmp_path, answer):
    # TL102 does not classify `self.x = f(...)` / `self.x = a.b`, on this ground.
    from torchlint.analysis.context import FileContext
    from torchlint.analysis.parsing import parse
    from torchlint.analysis.values import CONTAINER_KINDS, Kind
    fixtures = os.path.join(os.path.dirname(__file__), "fixtures", "rules")
    seen = 0
    for name in [n for n in sorted(os.listdir(fixtures)) if n.endswith(".py")]:
        text = open(os.path.join(fixtures, name), encoding="utf-8").read()
        tree, _ = parse(text, name)
        ctx = FileContext(text, str(tmp_path / name), tree, _SaysEverything(_answers()[answer]))
        for cls in ctx.module_classes:
            for binding in cls.attr_assignments:
                if isinstance(binding.value, (ast.Call, ast.Attribute)):
                    value = ctx.classify(binding.value, binding.scope)
                    assert value.kind not in CONTAINER_KINDS and not (value.kind is Kind.OTHER and value.empty)
                    seen += 1
        ctx.release()
    assert seen > 100
