"""Questions answered from the project's files, or from a question's own text, as jedi answers
them from the checked file (issue 23): the same answers, without jedi parsing the file."""
import ast
import json
import textwrap

import pytest

from torchlint.inference import file_inference
from torchlint.inference.layer import JediInference
from torchlint.inference.inference_cache import InferenceCache
from torchlint.inference.project_answers import QUESTION_FILE
from torchlint.analysis.scopes import NodeTable
from torchlint.analysis.source import SourceText
from torchlint.engine import check_source

BASE = '''
class Mixin:
    mixed: int = 3


class BaseConfig(Mixin):
    base_size: int = 8
    names: list[str] = []

    def __init__(self, tie=True, **kwargs):
        self.tie = tie
        self.extra = kwargs.pop("extra", None)

    def __getattribute__(self, key):
        return super().__getattribute__(key)

    @property
    def num_labels(self) -> int:
        return len(self.names)

    @classmethod
    def from_dict(cls, values):
        return cls(**values)
'''

CONFIG = '''
from typing import Optional

from .base import BaseConfig


def strict(cls):
    return cls


@strict
class Config(BaseConfig):
    hidden: int = 16
    window: int | list[int] = 4
    scale: Optional[float] = None
    kind: "str" = "a"
    flags: dict | None = None
    count: bool

    def __init__(self, old=32000, typed: int = 4, missing_default=None, heads: int = 2, **kwargs):
        self.old = old
        self.typed = typed
        self.missing_default = missing_default
        self.heads = heads
        self.kv_heads = self.heads
        self.pairs = [(1, 2)]
        super().__init__(**kwargs)
'''

MODEL = '''
import math

import torch
import torch.nn as nn

from .configuration import Config
from .helpers import Helper, make


class Block(nn.Module):
    def __init__(self, config: Config, other: "Config"):
        super().__init__()
        self.config = config
        a = config.hidden  # ask
        b = config.window  # ask
        c = config.scale  # ask
        d = config.kind  # ask
        e = config.flags  # ask
        f = config.count  # ask
        g = config.old  # ask
        h = config.typed  # ask
        i = config.missing_default  # ask
        j = config.kv_heads  # ask
        k = config.pairs  # ask
        m = config.base_size  # ask
        n = config.names  # ask
        o = config.mixed  # ask
        p = config.tie  # ask
        q = config.nowhere  # ask
        r = other.hidden  # ask
        s = self.config.heads  # ask
        t = getattr(config, "hidden", 3)  # ask
        u = math.sqrt(config.hidden)  # ask
        v = Helper  # ask
        w = Helper()  # ask
        x = sorted(config.names)  # ask
        y = Config  # ask
'''

HELPERS = '''
class Helper:
    pass


def make():
    return Helper()
'''

JEDI_ONLY = '''
import torch.nn as nn

from .configuration import Config
from .helpers import make


class Block(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        a = config.extra  # ask
        b = config.num_labels  # ask
        c = make()  # ask
        d = Config.from_dict({})  # ask
        e = max(1, 2)  # ask


def quoted(config: "Config"):
    f = config.num_labels  # ask
'''


LOCALS = '''
import torch
import torch.nn as nn


class Sub:
    def __init__(self):
        self.table = torch.zeros(3)
        self.width = 4


class Outer:
    def __init__(self):
        self.sub = Sub()


class Block(nn.Module):
    def __init__(self, outer: Outer):
        super().__init__()
        sub = outer.sub
        self.table = sub.table  # ask
        self.width = sub.width  # ask
'''

BOUND_TWICE = '''
from .locals import Outer


def build(outer: Outer):
    twice = outer.sub
    twice = outer
    found = twice.sub  # ask
    return found
'''


COMPREHENSIONS = '''
import torch.nn as nn

from .configuration import Config
from .locals import Sub


class Block(nn.Module):
    def __init__(self, config: Config, subs: list[Sub]):
        super().__init__()
        self.names = [n for n in config.names]
        self.tables = [s.table for s in subs]
        self.steps = [i for i in range(3)]


def shadowed(config: Config):
    return [config for config in (1, 2)]
'''


HELD = '''
import torch.nn as nn

from .configuration import Config
from .locals import Outer


class Block(nn.Module):
    def __init__(self, config: Config, outer: Outer):
        super().__init__()
        self.config = config
        self.outer = outer

    def forward(self, x):
        labels = self.config.num_labels  # ask
        table = self.outer.sub.table  # ask
        return x * table
'''


FUNCTIONS = '''
import math

import torch
import torch.nn as nn


def scale(width):
    return math.sqrt(width)


def table(width):
    return torch.zeros(width) * scale(width)


LIMIT = 3


def limited():
    return LIMIT


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        a = table(4)  # ask
        b = scale(4)  # ask
        c = limited()  # ask
'''


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def project(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": BASE, "pkg/configuration.py": CONFIG,
                      "pkg/model.py": MODEL, "pkg/helpers.py": HELPERS, "pkg/jedi_only.py": JEDI_ONLY,
                      "pkg/again.py": JEDI_ONLY})
    return tmp_path


def _questions(path):
    """The right-hand side of each `# ask` line, with the file's inference inputs."""
    text = path.read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    asked = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and lines[node.lineno - 1].endswith("# ask")]
    return text, tree, sorted(asked, key=lambda node: node.lineno)


def _answers(layer, path):
    """Each question's answer, the file's inference, and what jedi was asked."""
    text, tree, asked = _questions(path)
    inference = layer.for_file(text, str(path), SourceText(text), tree, NodeTable(tree))
    jedi_asked = []
    classify = inference._classify

    def asking_jedi(node, *question):
        jedi_asked.append(ast.unparse(node))
        return classify(node, *question)
    inference._classify = asking_jedi
    answers = [(ast.unparse(node), inference.classify(node, None)) for node in asked]
    return answers, inference, jedi_asked


def _kinds(answers):
    return {question: answer.kind.name if answer is not None else None for question, answer in answers}


def _own_text_answers(project, files, name):
    """Write ``files``, ask the `# ask` questions of pkg/``name``, and check that the file's text was
    never parsed: (its path, the answers, what jedi was asked)."""
    _write(project, files)
    path = project / "pkg" / name
    answers, inference, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert inference._script is None
    return path, answers, jedi_asked


def _as_jedi_on_the_file(project, monkeypatch, path, answers):
    """Assert that ``answers`` (of _answers) are jedi's when it is asked about the file's text."""
    _jedi_alone(monkeypatch)
    full, _, _ = _answers(JediInference(str(project), share_states=True), path)
    assert answers == full


def _jedi_alone(monkeypatch):
    """jedi asked about the checked file's own text, as before the files were read."""
    monkeypatch.setattr(file_inference.FileInference, "_from_files", lambda self, node: file_inference.ASK)
    monkeypatch.setattr(file_inference.FileInference, "_question_text", lambda self, node: None)
    monkeypatch.setattr(file_inference.FileInference, "_question_key", lambda self, node: None)


def test_the_files_answer_as_jedi_does_without_jedi(project, monkeypatch):
    model = project / "pkg" / "model.py"
    from_files, _, jedi_asked = _answers(JediInference(str(project), share_states=True), model)
    assert jedi_asked == []
    _jedi_alone(monkeypatch)
    from_jedi, _, jedi_asked = _answers(JediInference(str(project), share_states=True), model)
    assert len(jedi_asked) == len(from_jedi)  # (the comparison is with jedi's answers)
    assert from_files == from_jedi
    kinds = _kinds(from_files)
    # plain values (an int, a str, an Optional[float], a parameter's default, `self.heads` through
    # `self.kv_heads`, a mixin's annotation) and unknowns (a union with a list, a list, a dict, a
    # class, an instance of a project class, a name found nowhere) alike
    assert kinds["config.hidden"] == kinds["config.kv_heads"] == kinds["config.mixed"] == "OTHER"
    assert kinds["config.window"] is kinds["config.pairs"] is kinds["config.nowhere"] is kinds["Helper()"] is None


def test_a_question_jedi_must_answer_is_asked_in_its_own_text(project, monkeypatch):
    path = project / "pkg" / "jedi_only.py"
    layer = JediInference(str(project), share_states=True)
    answers, inference, jedi_asked = _answers(layer, path)
    # `config.num_labels` of quoted(config: "Config") is the same question as Block's: asked once;
    # `config.extra` (`kwargs.pop("extra", None)`) is typed from the files: not a tensor
    assert jedi_asked == ["config.num_labels", "make()", "Config.from_dict({})", "max(1, 2)"]
    assert inference._script is None and inference._question is not None  # the file's text was never parsed
    assert str(inference._question.path).endswith(QUESTION_FILE)
    _as_jedi_on_the_file(project, monkeypatch, path, answers)
    assert dict(answers)["config.num_labels"].kind.name == "OTHER"  # the property's annotation
    # and what it read is what the answers depend on: the question's own text is not a file
    assert str(project / "pkg" / "configuration.py") in inference._read
    assert not any(name.endswith(QUESTION_FILE) for name in inference._read)


def test_an_imported_name_jedi_answered_once_is_not_asked_again(project):
    layer = JediInference(str(project), share_states=True)
    first, _, _ = _answers(layer, project / "pkg" / "jedi_only.py")
    again, inference, jedi_asked = _answers(layer, project / "pkg" / "again.py")
    assert again == first
    # not `make()`, `Config.from_dict({})` (the same classmethod called on the same class),
    # `max(1, 2)`: what each is, is known; nor `config.extra`, `config.num_labels`: the same lines
    # beside the same folder as the first file's questions
    assert jedi_asked == []
    assert str(project / "pkg" / "helpers.py") in inference._read


def test_an_editor_asks_jedi_about_its_own_text(project):
    # The language server's texts change between questions: no question's own text, no answer kept
    # by what was asked about; answers read from files still come without jedi.
    layer = JediInference(str(project))
    _, inference, jedi_asked = _answers(layer, project / "pkg" / "jedi_only.py")
    assert len(jedi_asked) == 5 and inference._question is None and not layer.asked
    _, _, jedi_asked = _answers(layer, project / "pkg" / "model.py")
    assert jedi_asked == []


LOCAL = """
import torch.nn as nn

from .base import BaseConfig


class LocalConfig(BaseConfig):
    width: int = 3


class Encoder(nn.Module):
    def forward(self, x):
        return x


class Block(nn.Module):
    def __init__(self, config: LocalConfig, sizes):
        \"\"\"sizes (`list`): the sizes, as Google's style writes a type, which jedi does not read.\"\"\"
        super().__init__()
        self.encoder = Encoder()
        self.labels = config.num_labels
        self.first = sizes.first

    def forward(self, x):
        self.out = self.encoder(x)
        return self.out
"""


def test_jedi_is_not_asked_what_it_cannot_tell_and_a_files_class_is_copied_into_the_question(project):
    # `self.encoder(x)`: a call through Module.__call__, which jedi answers "unknown"; `sizes.first`:
    # a parameter only Google's docstring style types, which jedi does not read; `config.num_labels`
    # (a property): jedi reads the class of the file, copied into the question's own text.
    _write(project, {"pkg/local.py": LOCAL})
    path = project / "pkg" / "local.py"
    text = path.read_text()
    asked = []
    classify = file_inference.FileInference._classify

    def asking_jedi(self, node, *question):
        asked.append(ast.unparse(node))
        return classify(self, node, *question)
    layer = JediInference(str(project), share_states=True)
    texts = []
    new_script = layer.new_script
    layer.new_script = lambda text, path: texts.append(path) or new_script(text, path)
    file_inference.FileInference._classify = asking_jedi
    try:
        check_source(text, str(path), inference=layer)
    finally:
        file_inference.FileInference._classify = classify
    assert asked == ["config.num_labels"]
    assert str(path) not in texts and any(name.endswith(QUESTION_FILE) for name in texts)  # not the file's text


def test_a_local_assigned_once_from_a_parameter_is_asked_in_its_own_text(project, monkeypatch):
    # `sub = outer.sub` then `sub.table`: the question's own lines hold the assignment; jedi infers
    # the local from it as it would in the file.
    path, answers, jedi_asked = _own_text_answers(project, {"pkg/locals.py": LOCALS, "pkg/twice.py": BOUND_TWICE},
                                                  "locals.py")
    assert jedi_asked == ["sub.table", "sub.width"]
    assert _kinds(answers) == {"sub.table": "TENSOR", "sub.width": "OTHER"}
    # a local bound twice: jedi reads the file's flow
    _, twice, asked_twice = _answers(JediInference(str(project), share_states=True), project / "pkg" / "twice.py")
    assert asked_twice == ["twice.sub"] and twice._script is not None
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


def test_a_comprehensions_variable_is_asked_about_in_its_own_text(project, monkeypatch):
    # `[s.table for s in subs]`: jedi infers `s` from the iterable alone, in `[s.table for s in
    # subs]` under a function taking `subs: list[Sub]` as in the file.
    _write(project, {"pkg/locals.py": LOCALS, "pkg/comps.py": COMPREHENSIONS})
    path = project / "pkg" / "comps.py"
    text = path.read_text()
    tree = ast.parse(text)
    elements = [node.elt for node in ast.walk(tree) if isinstance(node, ast.ListComp)]

    def answers(layer):
        inference = layer.for_file(text, str(path), SourceText(text), tree, NodeTable(tree))
        found = [(ast.unparse(node), inference.classify(node, None)) for node in elements]
        return found, inference
    own, inference = answers(JediInference(str(project), share_states=True))
    assert inference._script is None  # the file's text was never parsed
    assert _kinds(own) == {"n": "OTHER", "s.table": "TENSOR", "i": "OTHER", "config": "OTHER"}
    _jedi_alone(monkeypatch)
    full, _ = answers(JediInference(str(project), share_states=True))
    assert own == full


def test_a_parameter_a_method_keeps_on_self_is_asked_about_in_its_own_text(project, monkeypatch):
    # `self.outer.sub.table` where `self.outer = outer` (outer: Outer) is the class's one binding:
    # asked as `outer.sub.table` under `def question(outer: Outer)`, as jedi reads it in the file.
    path, answers, jedi_asked = _own_text_answers(project, {"pkg/locals.py": LOCALS, "pkg/held.py": HELD}, "held.py")
    assert jedi_asked == ["self.config.num_labels", "self.outer.sub.table"]
    assert _kinds(answers) == {"self.config.num_labels": "OTHER", "self.outer.sub.table": "TENSOR"}
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


def test_a_function_of_the_file_is_asked_about_in_a_text_holding_it(project, monkeypatch):
    # `table(4)`: its definition and the helper it calls, with the file's imports, say all jedi
    # reads; `limited()` reads a constant of the file, which only the file's text holds.
    _write(project, {"pkg/functions.py": FUNCTIONS})
    path = project / "pkg" / "functions.py"
    texts = []
    own_text = file_inference.FileInference._question_text

    def recorded(self, node):
        question = own_text(self, node)
        texts.append((ast.unparse(node), question is not None))
        return question
    monkeypatch.setattr(file_inference.FileInference, "_question_text", recorded)
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["table(4)", "scale(4)", "limited()"]
    assert texts == [("table(4)", True), ("scale(4)", True), ("limited()", False)]
    assert _kinds(answers) == {"table(4)": "TENSOR", "scale(4)": "OTHER", "limited()": "OTHER"}
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


MAKES = '''
import torch
import torch.nn as nn


def make():
    return %s


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        value = make()  # ask
'''


def test_what_a_function_in_a_questions_own_lines_returns_is_not_kept_by_its_place(project):
    # Two files of one folder whose `make` sits at the same place of their questions' lines: what
    # one returns is not the other's answer.
    _write(project, {"pkg/tensor_make.py": MAKES % "torch.zeros(3)", "pkg/number_make.py": MAKES % "3"})
    layer = JediInference(str(project), share_states=True)
    tensor, _, _ = _answers(layer, project / "pkg" / "tensor_make.py")
    number, _, _ = _answers(layer, project / "pkg" / "number_make.py")
    assert [answer.kind.name for _, answer in tensor + number] == ["TENSOR", "OTHER"]


def test_a_question_too_deep_to_write_out_again_is_asked_in_the_files_text(project):
    # The comprehension's clause below is too deep for ast.unparse: its question is asked in the
    # file's text, and no rule fails.
    deep = "+".join(["1"] * 900)
    text = ("import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, sizes: list):\n"
            "        super().__init__()\n        self.kept = [i for i in sizes if i > %s]\n") % deep
    path = project / "pkg" / "deep.py"
    path.write_text(text)
    result = check_source(text, str(path), inference=JediInference(str(project), share_states=True))
    assert result.internal_errors == [] and result.parse_error is None


COMPOUND_CONFIG = '''
import torch


class Settings:
    def __init__(self, hidden: int = 8, heads: int = 2, flag=True, names: list = None, **kwargs):
        self.hidden = hidden
        self.heads = heads
        self.head_dim = self.hidden // self.heads
        self.scale = 1.0 / self.head_dim
        self.wide = self.hidden if flag else 2 * self.hidden
        self.name = f"h{hidden}"
        self.tag = self.name or "none"
        self.labels = kwargs.get("labels", self.labels if self.labels is not None else 2)
        self.heads_left = min(self.heads, 4)
        self.has_names = names is not None
        self.count = len(kwargs)
        self.sizes = list(kwargs)
        self.first = self.name[0]
        self.mask = torch.ones(3) * self.scale
        self.table = kwargs.get("table", torch.zeros(2))
        self.maybe = self.hidden if flag else torch.zeros(1)
        self.rows = names[0]
        self.grid = torch.zeros(1) if flag else torch.ones(1)
        self.negated = -self.mask
'''

COMPOUND_MODEL = '''
import torch.nn as nn

from .settings import Settings


class Block(nn.Module):
    def __init__(self, settings: Settings):
        super().__init__()
        a = settings.head_dim  # ask
        b = settings.scale  # ask
        c = settings.wide  # ask
        d = settings.tag  # ask
        e = settings.labels  # ask
        f = settings.heads_left  # ask
        g = settings.has_names  # ask
        h = settings.count  # ask
        i = settings.sizes  # ask
        j = settings.first  # ask
        k = settings.mask  # ask
        m = settings.table  # ask
        n = settings.maybe  # ask
        o = settings.rows  # ask
        p = settings.grid  # ask
        q = settings.negated  # ask
'''


def test_an_attribute_built_of_typed_parts_is_typed_without_jedi_and_never_hides_a_tensor(project, monkeypatch):
    # arithmetic, conditionals, comparisons, `kwargs.get(name, default)` and builtins' calls over
    # parameters and other attributes: typed from the files (an attribute's own value in its
    # default adds nothing); a part that may be a tensor (`torch.ones`, a default of `kwargs.get`,
    # an arm of a conditional, an operand) or that is not typed (an item of a list) leaves it to jedi
    _write(project, {"pkg/settings.py": COMPOUND_CONFIG, "pkg/compound.py": COMPOUND_MODEL})
    path = project / "pkg" / "compound.py"
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["settings.mask", "settings.table", "settings.maybe", "settings.rows", "settings.grid",
                          "settings.negated"]
    kinds = _kinds(answers)
    assert [kinds[q] for q in ("settings.head_dim", "settings.scale", "settings.wide", "settings.heads_left",
                               "settings.has_names", "settings.count", "settings.first")] == ["OTHER"] * 7
    assert kinds["settings.labels"] is kinds["settings.sizes"] is kinds["settings.tag"] is None
    assert kinds["settings.mask"] == kinds["settings.grid"] == "TENSOR"
    # jedi on the file: the same, or plain where the files say unknown (saying less), never a
    # tensor or a Module the files' answer hides
    _jedi_alone(monkeypatch)
    full, _, _ = _answers(JediInference(str(project), share_states=True), path)
    for (question, short), (_, long) in zip(answers, full):
        assert short == long or short is None and long is not None and long.kind.name == "OTHER", question


UNANNOTATED = '''
import torch.nn as nn

from .configuration import Config


class Block(nn.Module):
    def __init__(self, config, sizes=None):
        super().__init__()
        a = config.hidden  # ask
        b = sizes.first  # ask


def documented(config):
    """Build a block.

    :type config: Config
    """
    c = config.hidden  # ask


def commented(config):  # type: (Config) -> None
    d = config.hidden  # ask
'''


def test_an_unannotated_parameter_is_nothing_unless_words_type_it(project, monkeypatch):
    # jedi does not search the calls (dynamic_params is off): a parameter with no annotation, no
    # default and no type in its function's docstring or signature comment is nothing to it. A
    # default is typed from the files; a docstring or a type comment that may type it is jedi's.
    _write(project, {"pkg/unannotated.py": UNANNOTATED})
    path = project / "pkg" / "unannotated.py"
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["config.hidden", "config.hidden"]  # the documented one's, the commented one's
    assert [answer.kind.name if answer is not None else None for _, answer in answers] == [None, None, "OTHER", None]
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


BUILT = {
    "pkg/built_base.py": """
import torch.nn as nn


class Base(nn.Module):
    @classmethod
    def build(cls, config):
        return cls(config)
""",
    "pkg/built.py": """
import torch.nn as nn

from .built_base import Base
from .configuration import Config


class Block(Base):
    def __init__(self, config):
        super().__init__()


class Net(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.block = Block.build(config)
"""}


def test_an_answer_from_a_questions_own_text_comes_back_from_disk(project, tmp_path):
    # `Block.build(config)` is asked in a question's own text, which copies the file's Block into
    # it; jedi's answer goes through that copy. The question's text is no file: what the answer
    # depends on is the file (its key) and the files it imports, so the answers are stored and a
    # second run asks jedi nothing (they were not stored at all when the copy counted as a file).
    _write(project, BUILT)
    path = project / "pkg" / "built.py"
    text = path.read_text()
    cache = InferenceCache(tmp_path / "cache")
    asked = []
    classify = file_inference.FileInference._classify

    def asking_jedi(self, node, *question):
        asked.append(ast.unparse(node))
        return classify(self, node, *question)
    file_inference.FileInference._classify = asking_jedi
    try:
        check_source(text, str(path), inference=JediInference(str(project), cache=cache, share_states=True))
        assert asked == ["Block.build(config)"]
        (entry,) = sorted(cache.directory.glob("*/*.json"))
        depends_on = [d[0] for d in json.loads(entry.read_text())["dependencies"]]
        assert str(project / "pkg" / "built_base.py") in depends_on
        assert not any(name.endswith(QUESTION_FILE) for name in depends_on)
        check_source(text, str(path), inference=JediInference(str(project), cache=cache, share_states=True))
    finally:
        file_inference.FileInference._classify = classify
    assert asked == ["Block.build(config)"]


# The same file with its class named Other.
BUILT_OTHER = BUILT["pkg/built.py"].replace("Block", "Other").replace("self.block", "self.other")


def _first_call_answer(layer, path):
    """The answer to the first call assigned in ``path``."""
    text = path.read_text()
    tree = ast.parse(text)
    call = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call))
    return layer.for_file(text, str(path), SourceText(text), tree, NodeTable(tree)).classify(call, None)


BUILT_IMPORTED = '''
import torch.nn as nn

from .built import Block
from .configuration import Config


class Net(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.block = Block.build(config)
'''


def test_a_classmethod_building_the_class_it_is_called_on_answers_per_class(project, monkeypatch):
    # `Base.build` returns `cls(config)`: called on this file's Block, a Block; on another file's
    # Other, an Other; on Block imported, a Block by jedi's full name. jedi runs it with `cls` the
    # class it is called on: what is kept for the classmethod is "an instance of that class", not
    # the first answer, and what the helper returns is not kept by its place.
    _write(project, dict(BUILT, **{"pkg/built_other.py": BUILT_OTHER, "pkg/built_imported.py": BUILT_IMPORTED}))
    layer = JediInference(str(project), share_states=True)
    paths = [project / "pkg" / name for name in ("built.py", "built_other.py", "built_imported.py")]
    answers = [_first_call_answer(layer, path) for path in paths]
    assert [(v.kind.name, v.module_class) for v in answers] == [
        ("MODULE", "Block"), ("MODULE", "Other"), ("MODULE", "pkg.built.Block")]
    _jedi_alone(monkeypatch)  # as jedi answers on each file's own text, in a run of its own
    assert [_first_call_answer(JediInference(str(project), share_states=True), path) for path in paths] == answers


NUMPY = '''
import numpy as np
import numpy
import torch as nt


class M:
    def __init__(self):
        self.a = np.linspace(0, 1, 3)  # ask
        self.b = np.pi  # ask
        self.c = numpy.random.rand(3).T  # ask
        self.d = np.float32(2.0)  # ask
        self.e = nt.zeros(3)  # ask
        self.f = (np.cumsum([1, 2]) - 1).tolist()  # ask
        self.g = np.arange(5)[::-1]  # ask
'''

NUMPY_WITH_TORCH = '''
import numpy as np
import torch


class M:
    def __init__(self):
        self.h = (torch.zeros(3) - 1).float()  # ask
        self.i = (np.ones(3) * torch.ones(3)).sum()  # ask
        self.j = (np.ones(3) - 1).sum()  # ask
'''


def test_numpys_values_are_unknown_without_jedi_and_jedi_finds_no_tensor_there(project, monkeypatch):
    path, answers, jedi_asked = _own_text_answers(project, {"pkg/arrays.py": NUMPY}, "arrays.py")
    kinds = _kinds(answers)
    assert jedi_asked == ["nt.zeros(3)"]  # (a name bound by another import is not numpy's)
    assert kinds["nt.zeros(3)"] == "TENSOR"
    _jedi_alone(monkeypatch)
    jedis, _, _ = _answers(JediInference(str(project), share_states=True), path)
    for question, kind in _kinds(jedis).items():
        if question.startswith(("np.", "numpy.", "(np.")):
            assert kinds[question] is None and kind in (None, "OTHER"), question  # less at most, never a tensor


def test_an_operation_is_numpys_only_when_its_left_operand_is_and_its_right_one_a_number(project):
    # (a tensor on the right may take the operation over: its __rmul__)
    _write(project, {"pkg/mixed.py": NUMPY_WITH_TORCH})
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), project / "pkg" / "mixed.py")
    assert jedi_asked == ["(torch.zeros(3) - 1).float()", "(np.ones(3) * torch.ones(3)).sum()"]
    assert _kinds(answers)["(torch.zeros(3) - 1).float()"] == "TENSOR"
    assert _kinds(answers)["(np.ones(3) - 1).sum()"] is None



NOT_INSTALLED = '''
import torch
import timm_not_installed
import timm_not_installed.layers as layers
from transformers_not_installed.models.llama import LlamaRMSNorm, ACT2FN
from pkg.helpers import make_weight


class M:
    def __init__(self, config):
        self.a = timm_not_installed.create_model("resnet50")  # ask
        self.b = layers.table[3]  # ask
        self.c = LlamaRMSNorm(config.hidden_size)  # ask
        self.d = ACT2FN["gelu"]  # ask
        self.e = LlamaRMSNorm  # ask
        self.g = torch.zeros(3)  # ask
'''


def test_a_name_imported_from_a_package_found_nowhere_is_unknown_without_jedi_as_jedi_finds(project, monkeypatch):
    """jedi reads typeshed's stubs of a third-party package only where the package is found: a
    package no folder of the search path holds gives it no value."""
    path, answers, jedi_asked = _own_text_answers(project, {"pkg/missing.py": NOT_INSTALLED}, "missing.py")
    kinds = _kinds(answers)
    assert jedi_asked == ["torch.zeros(3)"]
    assert [kinds[q] for q in kinds if q not in jedi_asked] == [None] * 5 and kinds["torch.zeros(3)"] == "TENSOR"
    _jedi_alone(monkeypatch)
    jedis, _, _ = _answers(JediInference(str(project), share_states=True), path)
    assert {q: k for q, k in _kinds(jedis).items() if q not in jedi_asked} == \
        {q: k for q, k in kinds.items() if q not in jedi_asked}


GOOGLE_DOCSTRING = {
    "pkg/settings_google.py": '''
class Settings:
    def __init__(self, hidden, width=4):
        """Settings.

        Args:
            hidden (`int`): the size, in Google's style, which jedi reads no type from
            width (`int`): the width
        """
        self.hidden = hidden
        self.width = width
''',
    "pkg/uses_google.py": '''
from .settings_google import Settings


def build(settings: Settings):
    a = settings.hidden  # ask
    b = settings.width  # ask
'''}


def test_a_docstring_jedi_reads_no_type_from_leaves_a_parameter_to_the_files(project, monkeypatch):
    # The same test of what jedi reads from words as for the checked file's own parameters
    # (project_answers.typed_in_words): naming a parameter in Google's style types nothing.
    path, answers, jedi_asked = _own_text_answers(project, GOOGLE_DOCSTRING, "uses_google.py")
    assert jedi_asked == []
    assert _kinds(answers) == {"settings.hidden": None, "settings.width": "OTHER"}
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


CALLED_INSTANCES = {
    "pkg/parts.py": '''
import torch
from torch import nn


class Encoder(nn.Module):
    def forward(self, x):
        return x


class Settings:
    pass


def make(x):
    return torch.zeros(3)
''',
    "pkg/calls.py": '''
from typing import Optional, Type
import torch
from torch import nn
from .parts import Encoder, Settings, make


class Model(nn.Module):
    def __init__(self, settings: Settings, shared=make, norm=None):
        super().__init__()
        self.encoder = Encoder()
        self.settings = Settings()
        self.either = make if shared else Encoder()
        self.helper = make
        self.maker = Encoder
        if shared:
            self.one_of = make
        else:
            self.one_of = Encoder()
        self.given = shared
        self.norm = norm
        self.proj = None
        self.proj = make

    @torch.no_grad()
    def forward(self, x, settings: Settings, width: int = 3, act=make, plain=None,
                layer: Optional[Type[nn.Module]] = None, other: "Type[nn.Module] | None" = None,
                rebound: Optional[Type[nn.Module]] = None):
        rebound = rebound or Encoder
        a = self.encoder(x)  # ask
        b = self.settings(x)  # ask
        c = self.helper(x)  # ask
        d = self.maker(x)  # ask
        e = self.one_of(x)  # ask
        f = self.given(x)  # ask
        g = self.either(x)  # ask
        h = self.norm(x)  # ask
        i = self.proj(x)  # ask
        j = settings(x)  # ask
        k = width(x)  # ask
        l = act(x)  # ask
        m = plain(x)  # ask
        n = layer(x)  # ask
        o = other(x)  # ask
        p = rebound(x)  # ask
        return a
''',
}


def test_a_call_of_something_holding_an_instance_is_unknown_without_jedi(project, monkeypatch):
    # jedi answers "unknown" for a call of an instance whatever else the callee may be (a function,
    # executed, here), so an instance it surely finds settles it: among an attribute's assignments
    # a new instance of a project class, None, a parameter typed by its annotation or default; a
    # parameter typed so, or annotated Optional (jedi finds a NoneType instance there; also after
    # `rebound = rebound or Encoder`: see the next test). A function, a class, a parameter whose
    # default is one, is jedi's to answer. (A decorator other than @staticmethod or @classmethod
    # leaves self the instance.)
    _write(project, CALLED_INSTANCES)
    path = project / "pkg" / "calls.py"
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["self.helper(x)", "self.maker(x)", "self.given(x)", "self.either(x)", "act(x)"]
    kinds = _kinds(answers)
    unknown = ["self.encoder(x)", "self.settings(x)", "self.one_of(x)", "self.norm(x)", "self.proj(x)", "settings(x)",
               "width(x)", "plain(x)", "layer(x)", "other(x)", "rebound(x)"]
    assert [question for question in unknown if kinds[question] is not None] == []
    assert kinds["self.helper(x)"] == kinds["act(x)"] == "TENSOR" and kinds["self.maker(x)"] == "MODULE"
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


ANNOTATED_RETURNS = {
    "pkg/described.py": '''
from typing import Optional
import torch
from torch import nn


class Settings:
    def __init__(self):
        self.shadowed = torch.zeros

    def size(self) -> int:
        return 3

    def copy(self) -> "Settings":
        return Settings()

    def maybe(self) -> Optional[int]:
        return None

    def table(self) -> dict:
        return {}

    def tensor(self) -> torch.Tensor:
        return torch.zeros(3)

    def unannotated(self):
        return torch.zeros(3)

    async def later(self) -> int:
        return 3

    @torch.no_grad()
    def wrapped(self) -> int:
        return 3

    def shadowed(self) -> int:
        return 3


class Model(nn.Module):
    def __init__(self, settings: Settings):
        super().__init__()
        self.a = settings.size()  # ask
        self.b = settings.copy()  # ask
        self.c = settings.maybe()  # ask
        self.d = settings.table()  # ask
        self.e = settings.tensor()  # ask
        self.f = settings.unannotated()  # ask
        self.g = settings.later()  # ask
        self.h = settings.wrapped()  # ask
        self.settings = settings
        self.i = self.settings.copy()  # ask
        self.j = self.helper()  # ask
        self.k = settings.shadowed()  # ask

    def helper(self) -> "Settings":
        return Settings()
''',
}


def test_a_method_with_a_return_annotation_returns_it_without_jedi(project, monkeypatch):
    # jedi answers a method's call with its return annotation's values alone when they are some;
    # an annotation the files cannot type, none, an async method, a decorator, a class with a base
    # from the environment (nn.Module may assign an instance attribute of that name), an instance
    # attribute of the name (read first): jedi's to answer.
    _write(project, ANNOTATED_RETURNS)
    path = project / "pkg" / "described.py"
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["settings.tensor()", "settings.unannotated()", "settings.later()", "settings.wrapped()",
                          "self.helper()", "settings.shadowed()"]
    kinds = _kinds(answers)
    assert [kinds[q] for q in ("settings.size()", "settings.copy()", "settings.maybe()", "settings.table()",
                               "self.settings.copy()")] == ["OTHER", None, "OTHER", None, None]
    assert kinds["settings.tensor()"] == kinds["settings.unannotated()"] == "TENSOR"
    _as_jedi_on_the_file(project, monkeypatch, path, answers)


REBOUND_BY_OR = {
    "pkg/rebound.py": '''
from typing import Callable, Optional, Type
import torch
from torch import nn
from torch.nn import Module


class Block(nn.Module):
    pass


class Model(nn.Module):
    def __init__(self, a: Optional[Type[nn.Module]] = None, b: Optional[Callable] = None,
                 c: "Optional[Type[Block]]" = None, d: Optional[Type["Nope"]] = None, e=None,
                 f: Type[Module] | None = None, g: Optional[Type[nn.Module]] = None):
        super().__init__()
        a = a or Block
        b = b or Block
        c = c or Block
        d = d or Block
        e = e or Block
        f = f or Block
        if True:
            g = g or Block
        self.a = a(3)  # ask
        self.b = b(3)  # ask
        self.c = c(3)  # ask
        self.d = d(3)  # ask
        self.e = e(3)  # ask
        self.f = f(3)  # ask
        self.g = g(3)  # ask
''',
}


def test_a_parameter_kept_by_an_or_with_a_none_and_a_class_is_unknown_without_jedi(project, monkeypatch):
    # `a = a or Block` keeps the parameter's values when some are true (a class, a Callable) and
    # some false (None): jedi finds a NoneType instance in what is called. A member jedi cannot
    # type ("Nope"), no annotation (None alone: the right operand then), a binding under a
    # condition: jedi's to answer.
    _write(project, REBOUND_BY_OR)
    path = project / "pkg" / "rebound.py"
    answers, _, jedi_asked = _answers(JediInference(str(project), share_states=True), path)
    assert jedi_asked == ["d(3)", "e(3)", "g(3)"]
    kinds = _kinds(answers)
    assert [kinds[q] for q in ("a(3)", "b(3)", "c(3)", "f(3)")] == [None] * 4
    assert kinds["d(3)"] == kinds["e(3)"] == "MODULE"
    _as_jedi_on_the_file(project, monkeypatch, path, answers)
