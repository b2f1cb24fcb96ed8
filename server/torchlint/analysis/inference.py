"""The jedi layer: what names alone cannot tell.

The syntactic layer answers first; this layer is asked only about expressions it
left ``UNKNOWN`` and about class bases it could not resolve. It finds:

- Module bases defined in other files of the project or in installed packages
  (``class Block(MyBase)``), however deep, by jumping to each base's definition and
  reading that file's own imports;
- tensors and Parameters behind helper calls (``make_weight(3)``), variables,
  attribute chains (``model.fc.weight``) and functions jedi can execute.

jedi's first inference into torch costs seconds per process and later ones
milliseconds, so one :class:`JediInference` is kept per process and warmed once.
jedi is not thread-safe: callers use it from one thread at a time.
Without torch in the analysed environment, expression inference is off (jedi
would resolve nothing) and only base-class resolution runs.
"""
from __future__ import annotations

import ast
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Dict, Optional, Tuple

from . import torch_names as tn
from .imports import collect_imports
from .source import SourceText
from .values import OTHER, Kind, Value

log = logging.getLogger("torchlint")

_TENSOR_CLASSES = frozenset(["torch.Tensor", "torch._tensor.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"])
_PLAIN_TYPES = frozenset(["builtins.int", "builtins.float", "builtins.str", "builtins.bool", "builtins.NoneType",
                          "builtins.bytes", "torch.device", "torch.dtype", "torch.Size", "torch._C.device",
                          "torch._C.dtype", "torch.types.Device"])
_MAX_BASE_DEPTH = 6


def find_python(explicit: Optional[str] = None) -> str:
    """The interpreter whose packages the user's code runs with.

    ``--python`` / config ``python`` first, then the active virtual environment,
    then the interpreter running torchlint.
    """
    if explicit:
        return explicit
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        for candidate in (Path(venv) / "bin" / "python", Path(venv) / "Scripts" / "python.exe"):
            if candidate.exists():
                return str(candidate)
    return sys.executable


class JediInference:
    """Project-wide jedi state, shared by every file checked in this process."""

    def __init__(self, project_root: str, python: Optional[str] = None):
        import jedi  # imported here: the syntactic layer must work without it

        jedi.settings.dynamic_params = False  # searching call sites for parameter types is slow and rarely right
        self._jedi = jedi
        self.python = find_python(python)
        self.root = str(Path(project_root).resolve())
        try:
            self.environment = jedi.create_environment(self.python, safe=False)
            sys_path = self.environment.get_sys_path()
        except Exception as err:  # a broken --python: fall back to torchlint's own interpreter
            log.warning("cannot use %s for inference (%s); using %s", self.python, err, sys.executable)
            self.python = sys.executable
            self.environment = jedi.create_environment(sys.executable, safe=False)
            sys_path = self.environment.get_sys_path()
        self.project = jedi.Project(self.root, environment_path=self.python)
        self.torch_available = any(os.path.exists(os.path.join(p, "torch", "__init__.py")) for p in sys_path)
        self._class_cache: Dict[Tuple[str, int], bool] = {}
        self._file_cache: Dict[str, tuple] = {}  # path -> (mtime, tree, text)
        self._warmed = threading.Event()

    def describe(self) -> str:
        if self.torch_available:
            return "jedi inference with %s" % self.python
        return "no torch importable by %s: jedi resolves Module bases only; tensor inference is off" % self.python

    def warm(self) -> None:
        """Pay jedi's first trip into torch now (seconds) rather than on the first real question."""
        if self._warmed.is_set():
            return
        if self.torch_available:
            code = "import torch\nx = torch.zeros(1)\nx\np = torch.nn.Parameter(x)\np\n"
            try:
                script = self._jedi.Script(code=code, path=os.path.join(self.root, "__torchlint_warm__.py"),
                                           project=self.project, environment=self.environment)
                script.infer(3, 0)
                script.infer(5, 0)
            except Exception:
                log.debug("jedi warm-up failed", exc_info=True)
        self._warmed.set()

    def for_file(self, text: str, path: str, source) -> "FileInference":
        return FileInference(self, text, path, source)

    # -- classes in other files -------------------------------------------------------------
    def class_is_module(self, path: str, line: int, depth: int = 0) -> bool:
        """Whether the class defined at ``path:line`` derives from nn.Module."""
        key = (path, line)
        if key in self._class_cache:
            return self._class_cache[key]
        self._class_cache[key] = False  # cycles resolve to "no"
        result = self._resolve_class(path, line, depth)
        self._class_cache[key] = result
        return result

    def _resolve_class(self, path: str, line: int, depth: int) -> bool:
        if depth > _MAX_BASE_DEPTH:
            return False
        tree, text = self._parse(path)
        if tree is None:
            return False
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        node = next((c for c in classes if c.lineno == line), None)
        if node is None:
            return False
        imports = collect_imports(tree, [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))])
        by_name = {c.name: c for c in classes}
        script = None
        for base in node.bases:
            qualified = imports.qualify(base)
            if qualified is not None and (qualified in tn.MODULE_BASES or tn.is_module_class(qualified)):
                return True
            if isinstance(base, ast.Name) and base.id in by_name and by_name[base.id] is not node:
                if self.class_is_module(path, by_name[base.id].lineno, depth + 1):
                    return True
                continue
            if script is None:
                script = self._jedi.Script(code=text, path=path, project=self.project, environment=self.environment)
            if self._base_is_module(script, base, text, depth + 1):
                return True
        return False

    def _base_is_module(self, script, base: ast.expr, text: str, depth: int) -> bool:
        line, column = _last_token(base, text)
        if line is None:
            return False
        try:
            definitions = script.goto(line, column, follow_imports=True)
        except Exception:
            log.debug("jedi goto failed", exc_info=True)
            return False
        for definition in definitions:
            if definition.type != "class":
                continue
            full_name = tn.canonical(definition.full_name or "")
            if full_name in tn.MODULE_BASES or tn.is_module_class(full_name):
                return True
            if definition.module_path and definition.line and str(definition.module_path).endswith(".py"):
                if self.class_is_module(str(definition.module_path), definition.line, depth):
                    return True
        return False

    def _parse(self, path: str):
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            return None, ""
        cached = self._file_cache.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1], cached[2]
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
            from .engine import PARSE_LOCK  # one AST build at a time (CPython 3.11)
            with PARSE_LOCK:
                tree = ast.parse(text)
        except (SyntaxError, ValueError, OSError):
            text, tree = "", None
        self._file_cache[path] = (mtime, tree, text)
        return tree, text


class FileInference:
    """jedi's view of one file's text; created per check, asked only about unknowns."""

    def __init__(self, project: JediInference, text: str, path: str, source):
        self.project = project
        self.text = text
        self.path = path if os.path.isabs(path) else os.path.abspath(path)
        self.source = source  # SourceText: ast byte columns -> jedi code-point columns
        self._script = None
        self._cache: Dict[Tuple[int, int, str], Optional[Value]] = {}

    @property
    def script(self):
        if self._script is None:
            project = self.project
            self._script = project._jedi.Script(code=self.text, path=self.path, project=project.project,
                                                environment=project.environment)
        return self._script

    # -- hooks the syntactic layer calls --------------------------------------------------------
    def is_module_base(self, info, base: ast.expr) -> bool:
        return self.project._base_is_module(self.script, base, self.text, 1)

    def classify(self, node: ast.expr, scope) -> Optional[Value]:
        if not self.project.torch_available or not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            return None
        key = (node.lineno, node.col_offset, type(node).__name__)
        if key not in self._cache:
            try:
                self._cache[key] = self._classify(node)
            except Exception:  # jedi has its own bugs; an unknown is always a safe answer
                log.debug("jedi inference failed at %s:%s", self.path, node.lineno, exc_info=True)
                self._cache[key] = None
        return self._cache[key]

    def _classify(self, node: ast.expr) -> Optional[Value]:
        target = node.func if isinstance(node, ast.Call) else node
        line, column = _last_token(target, self.text, self.source)
        if line is None:
            return None
        names = self.script.infer(line, column)
        if not names:
            return None
        if isinstance(node, ast.Call):
            results = []
            for name in names:
                if name.type == "function":
                    results.extend(name.execute())
                elif name.type == "class":
                    results.append(name)  # constructing: an instance of that class
                else:
                    return None  # calling an instance: Module.__call__ is the syntactic layer's business
            names = results
            if not names:
                return None
            return self._values(names, constructed=True)
        return self._values(names, constructed=False)

    def _values(self, names, constructed: bool) -> Optional[Value]:
        values = set()
        for name in names:
            if name.type not in ("instance", "class") or (name.type == "class" and not constructed):
                return None
            values.add(self._value_of_class(name))
        if len(values) == 1:
            value = values.pop()
            return value if value.kind is not Kind.UNKNOWN else None
        return None

    def _value_of_class(self, name) -> Value:
        full_name = name.full_name or ""
        if full_name in _TENSOR_CLASSES:
            return Value(Kind.TENSOR)
        canonical = tn.canonical(full_name)
        if canonical == "torch.nn.Parameter":
            return Value(Kind.PARAMETER)
        if canonical == "torch.nn.Buffer":
            return Value(Kind.BUFFER)
        if full_name in _PLAIN_TYPES:
            return OTHER
        if tn.is_module_class(canonical):
            return Value(Kind.MODULE, module_class=canonical)
        module_path = str(name.module_path or "")
        if module_path.endswith(".py") and name.line and self.project.class_is_module(module_path, name.line):
            local = full_name.rsplit(".", 1)[-1] if os.path.abspath(module_path) == self.path else full_name
            return Value(Kind.MODULE, module_class=local)
        return Value(Kind.UNKNOWN)


def _last_token(node: ast.expr, text: str, source=None) -> Tuple[Optional[int], int]:
    """jedi's (line, column) of the last name in ``a.b.c`` / ``name``: where inference looks."""
    if isinstance(node, ast.Name):
        line, byte_col = node.lineno, node.col_offset
    elif isinstance(node, ast.Attribute):
        line = node.end_lineno
        byte_col = node.end_col_offset - len(node.attr.encode("utf-8"))
    else:
        return None, 0
    source = source if source is not None else SourceText(text)
    return line, source.column(line, byte_col)
