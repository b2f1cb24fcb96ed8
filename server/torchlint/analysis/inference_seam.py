"""What the core asks of a type-inference layer, declared by the core: the jedi layer
(:mod:`torchlint.inference`) implements it, the core and the rules type against it and never
import that layer. A check without one decides by names alone.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional, Protocol, Sequence, Union

from .findings import UncheckedClass
from .forward import BaseClass
from .scopes import ClassInfo, NodeTable, Scope
from .source import SourceText
from .values import Value


@dataclass(frozen=True)
class ProjectFunction:
    """A function (or method) of another file of the project, as the inference layer read it:
    that file's path, text and tree, and the function's statement in that tree."""

    path: str
    text: str
    tree: ast.Module
    node: Union[ast.FunctionDef, ast.AsyncFunctionDef]


class FileAnswers(Protocol):
    """One check's questions about one text, asked only where names alone left them open."""

    def is_module_base(self, info: Optional[ClassInfo], base: ast.expr) -> bool:
        """Whether ``base`` (a base of ``info``'s class that names could not settle) is a Module."""

    def classify(self, node: ast.expr, scope: Optional[Scope]) -> Optional[Value]:
        """What ``node`` holds (None: not known)."""

    def unchecked_classes(self, classes: Sequence[ClassInfo]) -> List[UncheckedClass]:
        """The classes, not Modules, whose Module-ness could not be read (a base not found)."""

    def base_class(self, base: ast.expr) -> Optional[Sequence[BaseClass]]:
        """``base`` (a base of a class of this text that is not this text's) and its own bases,
        each read from the file of the project that defines it, in lookup order; None when one
        is not a class of the project's files or what they derive from is not nn.Module."""

    def used_elsewhere(self, attr: str, class_name: str) -> bool:
        """Whether another file of the project may use ``<expr>.attr`` (call it, read its
        attributes or items) on an instance of this text's class ``class_name`` (True when unsure)."""

    def subclassed_elsewhere(self, name: str) -> bool:
        """Whether another file of the project may define a class with a base called ``name``
        (True when unsure)."""

    def function_in_project(self, func: ast.expr, method: Optional[str] = None,
                            within: Optional[str] = None) -> Optional[ProjectFunction]:
        """The function of another file of the project that ``func`` (a name or dotted name this
        text imports) stands for; with ``method``, ``func`` names a class and the answer is that
        class's own method. ``within``: the path of a file an earlier answer gave, whose tree
        ``func`` is of (a helper calling another). None when it is not a plain function of the
        project's files (a library's, a decorated one, one not found for certain)."""

    def finish(self) -> None:
        """The check is over: keep what was learnt (the disk cache), say why it stopped early."""


class Inference(Protocol):
    """A type-inference layer, shared by the checks of a process."""

    def for_file(self, text: str, path: str, source: SourceText, tree: Optional[ast.Module] = None,
                 nodes: Optional[NodeTable] = None) -> FileAnswers:
        """The questions of one check of ``text`` (``tree``: the tree the check uses, a reduced copy
        of the file's in an incremental check; ``nodes``: its NodeTable)."""
