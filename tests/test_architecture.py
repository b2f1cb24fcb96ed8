"""Imports go one way: analysis -> inference (the jedi layer) -> rules (and config, settings, the
engine) -> fixing / verify -> output -> lsp -> cli; of the layers above it only lsp and cli import
the inference layer, the others type against the core's seam (analysis.inference_seam). Read from the source with ast, late imports inside functions included,
so a cycle cannot hide behind an import placed in a function body."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "server" / "torchlint"

# Lowest first. A module may import its own layer and the layers before it, never a later one.
LAYERS = (
    ("analysis", ("torchlint", "torchlint.analysis", "torchlint.files", "torchlint.exit_codes",
                  "torchlint.processes", "torchlint.environments", "torchlint.collection")),
    ("inference", ("torchlint.inference",)),
    ("rules", ("torchlint.rules", "torchlint.config", "torchlint.settings", "torchlint.engine",
               "torchlint.incremental")),
    ("fixing / verify", ("torchlint.fixing", "torchlint.verify")),
    ("output", ("torchlint.output",)),
    ("lsp", ("torchlint.lsp",)),
    ("cli", ("torchlint.cli", "torchlint.__main__", "torchlint.flake8_plugin")),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index of the most specific layer prefix that names ``module``."""
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best is not None, "%s belongs to no layer: add it to LAYERS" % module
    return best


def imported_modules(path: Path, module: str = ""):
    """(line, module) of every torchlint module the file imports, anywhere in it (``module``:
    the file's dotted name, by default from its place in the package)."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from . import x` / `from .pkg import mod`: the names may be modules themselves.
            targets = [target] + ["%s.%s" % (target, alias.name) for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "torchlint" or target.startswith("torchlint."):
                yield node.lineno, target


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_has_a_layer():
    for path in SOURCES:
        layer_of(module_name(path))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_reaches_up_a_layer(path):
    own = layer_of(module_name(path))
    upward = []
    for line, target in imported_modules(path):
        if not is_module(target):
            continue  # a name imported from a module, not a module
        if layer_of(target) > own:
            upward.append("line %d imports %s (%s) from the %s layer" % (
                line, target, LAYERS[layer_of(target)][0], LAYERS[own][0]))
    assert not upward, "\n".join(upward)


# Layers above the jedi layer that still type against the core's seam (analysis.inference_seam),
# never the layer itself: the rules, the engine, incremental checks, fixing, verification, output.
SEAM_ONLY = ("torchlint.rules", "torchlint.config", "torchlint.settings", "torchlint.engine",
             "torchlint.incremental", "torchlint.fixing", "torchlint.verify", "torchlint.output")


@pytest.mark.parametrize("path", [p for p in SOURCES if module_name(p).startswith(SEAM_ONLY)],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_never_imports_the_inference_layer(path):
    reaching = ["line %d imports %s" % (line, target) for line, target in imported_modules(path)
                if target == "torchlint.inference" or target.startswith("torchlint.inference.")]
    assert not reaching, "\n".join(reaching)


def test_the_check_reads_late_imports_too(tmp_path):
    """An import inside a function body counts: the engine <-> rules cycle hid behind one."""
    source = tmp_path / "m.py"
    source.write_text("def check():\n    from ..rules import ALL_RULES\n")
    names = [target for _, target in imported_modules(source, "torchlint.analysis.m")]
    assert "torchlint.rules" in names
    assert layer_of("torchlint.rules") > layer_of("torchlint.analysis.m")


# -- function length ----------------------------------------------------------------------------

LONGEST_FUNCTION = 80  # lines, decorators left out: ast's end_lineno - lineno + 1

# The functions allowed longer, by "path::qualified name". Each entry must still be over the
# limit (a function split below it leaves the list).
LONG_FUNCTIONS = {
    # hot loops, one function on purpose (their locals bound once, no call per node or token)
    "analysis/scopes.py::NodeTable.__init__",  # the file index's one walk over the tree
    "inference/parso_parser.py::install",  # the parser loop put in parso's place
}


def function_lengths(path: Path):
    """(qualified name, lines) of every function and method in the file, nested ones too."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child.end_lineno - child.lineno + 1
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)
    yield from walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")


def test_no_function_is_longer_than_the_limit():
    lengths = {"%s::%s" % (path.relative_to(PACKAGE).as_posix(), name): lines
               for path in SOURCES for name, lines in function_lengths(path)}
    too_long = ["%s: %d lines" % (name, lines) for name, lines in sorted(lengths.items())
                if lines > LONGEST_FUNCTION and name not in LONG_FUNCTIONS]
    assert not too_long, "over %d lines (split them): %s" % (LONGEST_FUNCTION, ", ".join(too_long))
    stale = sorted(name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= LONGEST_FUNCTION)
    assert not stale, "allowed to be long but no longer are (or are gone): take them off LONG_FUNCTIONS: %s" % stale


def test_the_length_check_reads_nested_functions_and_methods(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("class C:\n    def f(self):\n        def g():\n            pass\n        return g\n")
    assert dict(function_lengths(source)) == {"C.f": 4, "C.f.g": 2}


# -- the command line keeps no state at module level ---------------------------------------------

CLI_SOURCES = [p for p in SOURCES if module_name(p) == "torchlint.cli" or module_name(p).startswith("torchlint.cli.")]
# A pool worker's ProcessState: set once by the pool's initializer, the only way its tasks reach it.
CLI_GLOBALS_ALLOWED = {("torchlint.cli.workers", "start_worker", "_worker")}
MUTABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def module_state(path: Path):
    """(function, name) of each ``global`` statement, and (None, name) of each module-level
    name bound to a list, dict or set."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, MUTABLE) or isinstance(value, ast.Call) and getattr(value.func, "id", "") in (
                "dict", "list", "set", "defaultdict"):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from ((None, ast.unparse(target)) for target in targets)
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Global):
                    yield from ((function.name, name) for name in node.names)


def test_the_command_line_keeps_its_state_in_objects_not_modules():
    # A run's state is its RunState; a process's (jedi layers, warnings said, collections) its
    # ProcessState; the signals received, StopSignals.
    found = ["%s: %s%s" % (module_name(path), "global %s in %s()" % (name, where) if where else name,
                           "" if where else " (a mutable value at module level)")
             for path in CLI_SOURCES for where, name in module_state(path)
             if (module_name(path), where, name) not in CLI_GLOBALS_ALLOWED]
    assert not found, "\n".join(found)


def test_the_state_check_sees_globals_and_mutable_values(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("SEEN = {}\nLIMIT = 3\nNAMES: list = []\n\n\ndef f():\n    global LIMIT\n    LIMIT = 4\n")
    assert sorted(module_state(source), key=str) == sorted([(None, "SEEN"), (None, "NAMES"), ("f", "LIMIT")], key=str)


# -- a module's private names are its own ------------------------------------------------------

def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path, module: str = ""):
    """(line, what) of every private name the file takes from another torchlint module: ``from
    torchlint.x import _y`` (relative or not), and ``x._y`` on a torchlint module it imported."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules = {}  # local name -> the torchlint module it is
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "torchlint" and not target.startswith("torchlint."):
                continue
            for alias in node.names:
                if is_module("%s.%s" % (target, alias.name)):
                    modules[alias.asname or alias.name] = "%s.%s" % (target, alias.name)
                elif is_private(alias.name) and target != module:
                    uses.append((node.lineno, "from %s import %s" % (target, alias.name)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torchlint.") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and isinstance(node.value, ast.Name) \
                and modules.get(node.value.id, module) != module:
            uses.append((node.lineno, "%s.%s (%s)" % (node.value.id, node.attr, modules[node.value.id])))
    return sorted(uses)


OWN_CODE = [p for p in SOURCES if "stubs" not in p.relative_to(PACKAGE).parts]


@pytest.mark.parametrize("path", OWN_CODE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_uses_another_modules_private_names(path):
    """A name another module needs is public (no leading underscore), or lives in that module."""
    uses = ["line %d: %s" % use for use in private_uses(path)]
    assert not uses, "\n".join(uses)


def test_the_private_name_check_sees_imports_and_module_attributes(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from .files import _hidden, shown\nfrom . import files\nfrom .m import _own\n"
                      "def f():\n    return files._helper(), files.public()\n")
    uses = [what for _, what in private_uses(source, "torchlint.m")]
    assert uses == ["from torchlint.files import _hidden", "files._helper (torchlint.files)"]
