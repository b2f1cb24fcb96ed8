"""torchlint's parser loop for parso (inference/parso_parser.py) builds the trees parso's own loop
builds: on real modules, on broken ones (every error-recovery path the mutations reach), with
each grammar version jedi may load, and through parso's diff parser (the editor's re-parses)."""
from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import parso
import parso.python.parser as python_parser
import pytest

from torchlint.inference import parso_parser

ROOT = Path(__file__).resolve().parent.parent
# Real modules of several styles: this project's analysis layer and tests, and a few of the
# standard library's (decorators, async code, match statements, f-strings, type hints).
_STDLIB = Path(random.__file__).parent
SOURCES = [ROOT / "server" / "torchlint" / name for name in (
    "analysis/scopes.py", "analysis/values.py", "inference/jedi_access.py", "analysis/notebook.py",
    "inference/parso_parser.py")] + [
    ROOT / "tests" / "test_rule_tl101.py"] + [
    _STDLIB / name for name in ("dataclasses.py", "asyncio/tasks.py", "string.py") if (_STDLIB / name).exists()]

# Broken code of the shapes an editor sees mid-keystroke, each reaching parso's error recovery.
BROKEN = [
    "def f(:\n    return 1\n",
    "class A(\n    x = 1\n",
    "x = [1, 2\ny = 3\n",
    "if x\n    pass\nelse:\n  pass\n",
    "def f():\n  return 1\n    x = 2\n y = 3\n",
    "f'{x\n",
    "f'{x!r:>{width}}' + f\"{'a' 'b'}\" \n",
    "lambda: (yield)\n@\ndef g(): ...\n",
    "import\nfrom . import\nfrom x import (a,\n",
    "a = 1 +\n",
    "try:\n    x\nexcept\n",
    "with open(f) as:\n    pass\n",
    "async def f():\n    await\n    async for x in :\n        pass\n",
    "match x:\n    case [1, *rest] if rest:\n        pass\n    case {'a': 1, **kw}:\n",
    "x = (\n",
    ")))\n",
    "\tdef f():\n  \tpass\n",
    "print 'hello'\n",
    "def f(*, **kw, a=1): pass\n",
    "x := 1\n(y := 2)\n",
    "class A:\n    def f(self):\n        self.x = torch.zeros(\n    def g(self):\n        return self.x\n",
    "",
    "\n\n",
    "x",
    "x = 1\\\n",
    "'''unterminated\n",
    "def f():\n\treturn 1\n        return 2\n",
]


def _dump(node, out: List[Tuple[object, ...]]) -> List[Tuple[object, ...]]:
    """Every node of a tree, in order: its class, type, positions, value and prefix."""
    out.append((type(node).__name__, node.type, node.start_pos, node.end_pos, getattr(node, "value", None),
                getattr(node, "prefix", None)))
    for child in getattr(node, "children", ()):
        assert child.parent is node
        _dump(child, out)
    return out


def _used_names(module, filed: bool) -> List[Tuple[str, List[Tuple[int, int]]]]:
    """The module's used names as parso's walk of its tree finds them (``get_used_names``), by
    position. ``filed``: the parse filed them already (torchlint's loop), and they must be the
    very leaves the walk finds, in its order."""
    made = module._used_names
    module._used_names = None
    walked = module.get_used_names()
    if filed:
        assert made is not None
        assert {k: [id(leaf) for leaf in v] for k, v in made.items()} == \
            {k: [id(leaf) for leaf in v] for k, v in walked.items()}
    return sorted((value, [leaf.start_pos for leaf in leaves]) for value, leaves in walked.items())


def _mutations(text: str, rng: random.Random, count: int) -> Iterator[str]:
    """Broken copies of ``text``: cut at a point, a line dropped, a token's worth of junk inserted."""
    lines = text.splitlines(keepends=True)
    junk = ["(", ")", "[", ":", "def ", "class ", "\n    ", "\t", "'", '"""', "=", "lambda", "@", "\\", "if ", "else"]
    for _ in range(count):
        choice = rng.randrange(3)
        if choice == 0 or len(lines) < 2:
            yield text[:rng.randrange(len(text) + 1)]
        elif choice == 1:
            index = rng.randrange(len(lines))
            yield "".join(lines[:index] + lines[index + 1:])
        else:
            at = rng.randrange(len(text) + 1)
            yield text[:at] + rng.choice(junk) + text[at:]


def _trees(texts: List[str], version: str) -> List[Tuple[List[Tuple[object, ...]], List[object]]]:
    """Each text's tree and used names."""
    grammar = parso.load_grammar(version=version)
    filed = "_add_token" in vars(python_parser.Parser)
    trees = []
    for text in texts:
        module = grammar.parse(text, cache=False, diff_cache=False)
        trees.append((_dump(module, []), _used_names(module, filed)))
    return trees


@pytest.fixture
def parso_loop():
    """parso's own loop for the duration of a test, torchlint's again afterwards."""
    parso_parser.uninstall()
    yield
    assert parso_parser.install()


def _texts() -> List[str]:
    rng = random.Random(23)
    texts = list(BROKEN)
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        texts.extend(_mutations(text, rng, 4))
    return texts


def test_the_faster_loop_is_what_the_analysis_layer_parses_with():
    from torchlint.inference import jedi_access  # (importing it installs the loop)
    assert jedi_access.parso_parser is parso_parser
    assert "_add_token" in vars(python_parser.Parser)
    assert parso_parser.install()  # (a second call changes nothing)


@pytest.mark.parametrize("version", ["3.8", "%d.%d" % sys.version_info[:2]])
def test_the_faster_loop_builds_parsos_trees_on_real_and_broken_code(version, parso_loop):
    texts = _texts()
    assert len(SOURCES) >= 6 and len(texts) >= 50
    expected = _trees(texts, version)
    assert parso_parser.install()
    got = _trees(texts, version)
    for text, mine, theirs in zip(texts, got, expected):
        assert mine == theirs, text[:200]
    # The broken code reached the error recovery: error nodes in many trees.
    assert sum(any(entry[0] in ("PythonErrorNode", "PythonErrorLeaf") for entry in tree) for tree, _ in got) >= 25


def test_the_faster_loop_builds_parsos_trees_through_the_diff_parser(tmp_path, parso_loop):
    """Each version of an edited file parsed against the last one's tree (parso's diff parser,
    which jedi uses on a file it has parsed before)."""
    text = SOURCES[0].read_text(encoding="utf-8")
    rng = random.Random(5)
    versions = [text] + list(_mutations(text, rng, 12)) + [text]

    def parse_all() -> List[Tuple[List[Tuple[object, ...]], List[object]]]:
        grammar = parso.load_grammar()
        path = tmp_path / "edited.py"
        trees = []
        for version in versions:
            module = grammar.parse(version, path=str(path), diff_cache=True)
            names = module.get_used_names()  # (the diff parser's module: its names are walked again after each edit)
            trees.append((_dump(module, []), sorted((k, [leaf.start_pos for leaf in v]) for k, v in names.items())))
        parso.cache.parser_cache.get(grammar._hashed, {}).pop(path, None)
        return trees

    expected = parse_all()
    assert parso_parser.install()
    assert parse_all() == expected


def test_a_parso_it_was_not_written_for_keeps_its_own_loop(parso_loop, monkeypatch):
    monkeypatch.setattr(parso, "__version__", "0.9.0")
    assert not parso_parser.install()
    assert "_add_token" not in vars(python_parser.Parser)
    assert parso.parse("x = y\n")._used_names is None  # (names walked on demand, as parso does)
