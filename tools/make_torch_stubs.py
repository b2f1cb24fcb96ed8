"""Write the stubs of torch's API that torchlint ships (server/torchlint/stubs/torch-stubs).

torchlint's jedi layer needs to know what torch's factories, ``nn.Module``, ``nn.Parameter``,
the layers and ``Tensor``'s methods return. Where torchlint runs without torch (a pre-commit
environment, pipx, a CI lint job), it reads these stubs instead, so that its findings are the
same whether or not torch is installed. They are generated from the pinned torch
(PINNED_TORCH, the one the test extra installs), never imported: its source files are read and
cut down to what inference reads.

    .venv/bin/python tools/make_torch_stubs.py           # rewrite the stubs
    .venv/bin/python tools/make_torch_stubs.py --check   # exit 1 when they are out of date

What a stub keeps of each module (the same module paths as torch, so that names such as
``torch.nn.modules.linear.Linear`` are the same either way): imports, classes, assignments and
signatures; a function's body only when it says something its signature does not (no return
annotation: jedi reads the ``return``), and ``__init__`` bodies whole (they say what each
attribute holds: ``self.weight = Parameter(...)``). Docstrings go. A ``.pyi`` of torch's own wins
over the ``.py`` beside it, as it does for jedi.

One thing jedi reads differently in a stub: a name with a leading underscore cannot be imported
from a ``.pyi`` (jedi's rule for private names of stubs), while it can from torch's ``.py``. torch's
own stubs import such names from its ``.py`` modules (``from torch.types import _dtype, _int``:
the parameter types of the overloads, so jedi could not pick ``Tensor.type(torch.float32)``'s
overload and answered "str or Tensor"). Where a stub imports a private name from a module that
torch ships as ``.py``, the import is rewritten to what that module binds the name to: the
import it comes from (``from torch import dtype as _dtype``), or a copy of its assignment
(``_size: TypeAlias = Size | ...``) with what that uses imported under private names.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import importlib.util
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "server" / "torchlint" / "stubs" / "torch-stubs"
PINNED_TORCH = "2.13.0"

# The modules inference reads: the top level, the tensor, the factories and the C bindings'
# signatures, nn and its layers, functional, init, autograd's Variable, the optimizers.
MODULES = [
    "__init__", "_tensor", "types", "functional", "_C/__init__", "_C/_VariableFunctions", "_C/_nn",
    "nn/__init__", "nn/parameter", "nn/functional", "nn/init", "nn/modules/*",
    "autograd/__init__", "autograd/variable", "optim/__init__", "optim/optimizer", "optim/*",
]


def torch_root() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this environment (pip install torch==%s)" % PINNED_TORCH)
    return Path(list(spec.submodule_search_locations)[0])


def torch_version(root: Path) -> str:
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", (root / "version.py").read_text(encoding="utf-8"))
    return match.group(1).split("+")[0] if match else "unknown"


def sources(root: Path) -> List[Path]:
    """The torch files to cut down, a .pyi preferred to the .py beside it."""
    found = {}
    for pattern in MODULES:
        for suffix in (".py", ".pyi"):
            for path in sorted(root.glob(pattern + suffix)):
                if path.name.startswith("_") and path.stem != "__init__" and "*" in pattern:
                    continue  # a layer module's private helpers (_functions.py): nothing users build
                found[path.with_suffix("")] = path if suffix == ".pyi" or path.with_suffix("") not in found \
                    else found[path.with_suffix("")]
    return sorted(found.values())


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


_ELLIPSIS = ast.Expr(ast.Constant(...))


class _Cut(ast.NodeTransformer):
    """Cuts one module down to what inference reads (see the module's docstring)."""

    def __init__(self):
        self.in_class = 0

    def _body(self, body: List[ast.stmt]) -> List[ast.stmt]:
        kept = []
        for stmt in body:
            if _is_docstring(stmt):
                continue
            if isinstance(stmt, ast.Expr) and not self.in_class and not isinstance(stmt.value, ast.Constant):
                continue  # a call made at import time (registrations, checks)
            result = self.visit(stmt)
            if result is None:
                continue
            kept.extend(result if isinstance(result, list) else [result])
        return kept or [ast.Pass()]

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = self._body(node.body)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self.in_class += 1
        node.body = self._body(node.body)
        self.in_class -= 1
        return node

    def _function(self, node):
        keep_body = node.name == "__init__" and self.in_class or (node.returns is None and _returns_something(node))
        if keep_body:
            node.body = [s for s in node.body if not _is_docstring(s)] or [_ELLIPSIS]
        else:
            node.body = [_ELLIPSIS]
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        # In a stub, `from m import x` is private to it; `from m import x as x` exports x, as the
        # module itself does (`torch.Tensor` is `from torch._tensor import Tensor`).
        for alias in node.names:
            if alias.name != "*" and alias.asname is None:
                alias.asname = alias.name
        return node

    def visit_If(self, node: ast.If) -> ast.If:
        node.body = self._body(node.body)
        node.orelse = self._body(node.orelse) if node.orelse else []
        return node

    def visit_Try(self, node: ast.Try) -> ast.Try:
        node.body = self._body(node.body)
        for handler in node.handlers:
            handler.body = self._body(handler.body)
        node.orelse = self._body(node.orelse) if node.orelse else []
        node.finalbody = self._body(node.finalbody) if node.finalbody else []
        return node

    def generic_visit(self, node):
        if isinstance(node, (ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith, ast.Delete, ast.Assert,
                             ast.Raise)) and not self.in_class:
            return None  # module-level code that runs: nothing a stub says
        return node


def _returns_something(function) -> bool:
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(function))


def cut(text: str, name: str) -> ast.Module:
    return _Cut().visit(ast.parse(text, name))


def module_name(relative: Path) -> str:
    """``nn/modules/conv.py`` -> ``torch.nn.modules.conv``; ``nn/__init__.py`` -> ``torch.nn``."""
    parts = list(relative.with_suffix("").parts)
    return ".".join(["torch"] + (parts[:-1] if parts[-1] == "__init__" else parts))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _top_level(tree: ast.Module) -> List[ast.stmt]:
    """The module's statements, those in top-level ``if`` and ``try`` blocks too (imports under
    ``if TYPE_CHECKING:``)."""
    found, pending = [], list(tree.body)
    while pending:
        stmt = pending.pop(0)
        found.append(stmt)
        if isinstance(stmt, ast.If):
            pending.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Try):
            pending.extend(stmt.body + [s for h in stmt.handlers for s in h.body] + stmt.orelse + stmt.finalbody)
    return found


def _bound_names(tree: ast.Module) -> set:
    names = set()
    for stmt in _top_level(tree):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _binding(tree: ast.Module, name: str) -> Optional[ast.stmt]:
    """The last top-level statement of ``tree`` that binds ``name``."""
    found = None
    for stmt in _top_level(tree):
        if isinstance(stmt, ast.ImportFrom) and any((a.asname or a.name) == name for a in stmt.names):
            found = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = stmt
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import)) and name in (
                [stmt.name] if not isinstance(stmt, ast.Import) else [(a.asname or a.name) for a in stmt.names]):
            found = stmt
    return found


class _PrivateImports:
    """Rewrites, in the generated stubs, imports of private names from modules torch ships as
    ``.py`` (see the module's docstring). ``modules``: module name -> (its cut tree, whether torch
    ships it as ``.py``)."""

    PREFIX = "_torch_stub_"  # the private names a copied assignment's own imports are bound to

    def __init__(self, modules: Dict[str, Tuple[ast.Module, bool]]):
        self.modules = modules

    def rewrite(self, tree: ast.Module) -> None:
        self._imported: set = set()  # the imports added to this tree so far (ast.dump): each once
        self._rewrite_block(tree.body, tree)

    def _rewrite_block(self, body: List[ast.stmt], tree: ast.Module) -> None:
        index = 0
        while index < len(body):
            stmt = body[index]
            if isinstance(stmt, ast.If):
                self._rewrite_block(stmt.body, tree)
                self._rewrite_block(stmt.orelse, tree)
            elif isinstance(stmt, ast.Try):
                for block in [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in stmt.handlers]:
                    self._rewrite_block(block, tree)
            elif isinstance(stmt, ast.ImportFrom):
                replacement = self._rewritten_import(stmt, tree)
                if replacement is not None:
                    body[index:index + 1] = replacement
                    index += len(replacement)
                    continue
            index += 1

    def _rewritten_import(self, stmt: ast.ImportFrom, tree: ast.Module) -> Optional[List[ast.stmt]]:
        if stmt.level or stmt.module not in self.modules or not self.modules[stmt.module][1]:
            return None
        kept, added = [], []
        for alias in stmt.names:
            statements = self._resolved(stmt.module, alias.name, alias.asname or alias.name, tree, set()) \
                if _is_private(alias.name) else None
            if statements is None:
                kept.append(alias)
            else:
                added.extend(statements)
        if not added:
            return None
        fresh = []
        for statement in added:
            if isinstance(statement, ast.ImportFrom):
                if ast.dump(statement) in self._imported:
                    continue
                self._imported.add(ast.dump(statement))
            fresh.append(statement)
        return ([ast.ImportFrom(stmt.module, kept, 0)] if kept else []) + fresh

    def _resolved(self, module: str, name: str, bound_as: str, tree: ast.Module, seen: set
                  ) -> Optional[List[ast.stmt]]:
        """Statements that bind ``bound_as`` in ``tree`` to what ``module`` binds ``name`` to,
        without importing a private name from a stub; None where that cannot be done."""
        if (module, name) in seen or module not in self.modules or not self.modules[module][1]:
            return None
        seen.add((module, name))
        source = self.modules[module][0]
        binding = _binding(source, name)
        if isinstance(binding, ast.ImportFrom) and not binding.level:
            original = next(a.name for a in binding.names if (a.asname or a.name) == name)
            if _is_private(original) and binding.module in self.modules:
                return self._resolved(binding.module, original, bound_as, tree, seen)
            return [ast.ImportFrom(binding.module, [ast.alias(original, bound_as)], 0)]
        if isinstance(binding, (ast.Assign, ast.AnnAssign)) and name == bound_as:
            return self._copied(module, binding, source, tree)
        return None

    def _copied(self, module: str, assignment: ast.stmt, source: ast.Module, tree: ast.Module
                ) -> Optional[List[ast.stmt]]:
        """The assignment, its names that ``tree`` does not bind imported from ``module`` under
        private names (so that the stub exports nothing new)."""
        copy = ast.parse(ast.unparse(assignment)).body[0]
        bound, available = _bound_names(tree), _bound_names(source)
        imports = []
        for node in ast.walk(copy):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) \
                    or node.id in bound or hasattr(builtins, node.id):
                continue
            if node.id not in available:
                return None
            statements = self._resolved(module, node.id, self.PREFIX + node.id, tree, set()) \
                if _is_private(node.id) else [ast.ImportFrom(module, [ast.alias(node.id, self.PREFIX + node.id)], 0)]
            if statements is None:
                return None
            imports.extend(statements)
            node.id = self.PREFIX + node.id
        return imports + [copy]


def write_stubs(root: Path, out: Path) -> int:
    """Write the stubs of the torch at ``root`` into ``out`` (replaced); the number of files."""
    version = torch_version(root)
    if out.exists():
        shutil.rmtree(out)
    header = ("# Generated by tools/make_torch_stubs.py from torch %s (BSD-3-Clause, see LICENSE): "
              "do not edit.\n" % version)
    modules: Dict[str, Tuple[ast.Module, bool]] = {}
    targets: Dict[str, Path] = {}
    for path in sources(root):
        relative = path.relative_to(root)
        name = module_name(relative)
        modules[name] = (cut(path.read_text(encoding="utf-8"), str(path)), path.suffix == ".py")
        targets[name] = out / relative.with_suffix(".pyi")
    private_imports = _PrivateImports(modules)
    for name, (tree, _) in modules.items():
        private_imports.rewrite(tree)
    for name, (tree, _) in modules.items():
        targets[name].parent.mkdir(parents=True, exist_ok=True)
        targets[name].write_text(header + ast.unparse(ast.fix_missing_locations(tree)) + "\n", encoding="utf-8")
    count = len(modules)
    for folder in sorted({p.parent for p in out.rglob("*.pyi")}):
        init = folder / "__init__.pyi"
        if not init.exists():  # a package jedi must be able to walk into
            init.write_text(header, encoding="utf-8")
    (out / "VERSION").write_text(version + "\n", encoding="utf-8")
    license_file = _torch_license(root)
    if license_file is not None:
        shutil.copyfile(license_file, out / "LICENSE")
    return count


def _torch_license(root: Path) -> Optional[Path]:
    for info in sorted(root.parent.glob("torch-*.dist-info")):
        for name in ("LICENSE", "licenses/LICENSE", "LICENSE.txt"):
            if (info / name).is_file():
                return info / name
    return None


def differences(a: Path, b: Path) -> List[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    different = sorted(str(p) for p in files_a ^ files_b)
    different += sorted(str(p) for p in files_a & files_b if (a / p).read_bytes() != (b / p).read_bytes())
    return different


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with a fresh generation, write nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    root = torch_root()
    version = torch_version(root)
    if version != PINNED_TORCH:
        print("torch %s is installed; the stubs are made from torch %s (pip install torch==%s)"
              % (version, PINNED_TORCH, PINNED_TORCH), file=sys.stderr)
        return 2
    if args.check:
        with tempfile.TemporaryDirectory() as fresh:
            write_stubs(root, Path(fresh) / "torch-stubs")
            different = differences(Path(fresh) / "torch-stubs", args.out)
        for name in different:
            print("out of date: %s" % name)
        return 1 if different else 0
    count = write_stubs(root, args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print("%d stubs from torch %s, %.0f kB, in %s" % (count, version, size / 1024, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
