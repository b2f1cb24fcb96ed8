"""Clean-ups a rule's fixes may need once every fix of a file is in (``Rule.cleanups``): the fix
applier (torchlint.fixing) runs those of the rules whose fixes it applied, and knows nothing of
what they do. Each takes the text before the fixes and the text after them, and returns the
text to keep (a SyntaxError or ValueError leaves ``after`` as it was)."""
from __future__ import annotations

import ast
from typing import Dict, List, Set, Union

from ..analysis.source import SourceText


def _is_no_grad(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.With) and len(stmt.items) == 1 and stmt.items[0].optional_vars is None):
        return False
    call = stmt.items[0].context_expr
    func = call.func if isinstance(call, ast.Call) and not call.args and not call.keywords else None
    return (isinstance(func, ast.Attribute) and func.attr == "no_grad") or (
        isinstance(func, ast.Name) and func.id == "no_grad")


def merge_no_grad_blocks(before: str, after: str) -> str:
    """`with torch.no_grad(): a.copy_(x)` right after another such block, made by a fix: one block.

    Merged as if one pair at a time, the first in ``ast.walk``'s order each time, but a level of
    the tree at once: a merge never changes whether another pair of its level merges, and only
    makes pairs one level down (where the two bodies meet), so a file's thousand merges cost a
    few parses, not a thousand."""
    user_text = _Occurrences(before)
    while True:
        tree = ast.parse(after)
        source = SourceText(after)
        headers = _mergeable_headers(tree, source, user_text)
        if not headers:
            return after
        lines = source.lines_with_endings()
        for header in headers:
            lines[header - 1] = ""
        after = "".join(lines)


def _mergeable_headers(tree: ast.Module, source: SourceText, user_text: "_Occurrences") -> List[int]:
    """The header lines of the `no_grad` blocks to merge into the block above them, at the shallowest
    level of the tree that has any."""
    level: List[ast.AST] = [tree]
    while level:
        headers = []
        for node in level:
            for name in ("body", "orelse", "finalbody"):
                block = getattr(node, name, None)
                if not isinstance(block, list):
                    continue
                for first, second in zip(block, block[1:]):
                    if _is_no_grad(first) and _is_no_grad(second) and second.lineno == first.end_lineno + 1 \
                            and second.col_offset == first.col_offset and second.body[0].lineno > second.lineno \
                            and second.body[0].col_offset == first.body[0].col_offset \
                            and source.segment(second) not in user_text:
                        headers.append(second.lineno)
        if headers:
            return headers
        level = [child for node in level for child in ast.iter_child_nodes(node)
                 if isinstance(child, _HOLDS_STATEMENTS)]
    return []


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)  # the nodes a statement can be in


class _Occurrences:
    """Whether a block's text occurs in a text (the file before its fixes), found among the places
    where the block's first line does, which are looked up once per first line: thousands of blocks
    are not each searched for through the whole file."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._places: Dict[str, List[int]] = {}

    def __contains__(self, segment: str) -> bool:
        head = segment[: segment.find("\n") + 1] or segment
        places = self._places.get(head)
        if places is None:
            places = self._places[head] = []
            place = self._text.find(head)
            while place >= 0:
                places.append(place)
                place = self._text.find(head, place + 1)
        return any(self._text.startswith(segment, place) for place in places)


def drop_torch_imports_left_unused(before: str, after: str) -> str:
    """The torch imports that only the code fixes replaced used (`from torch.autograd import
    Variable` once no `Variable(...)` is left), removed: only a whole import on a line of its own,
    and only names ``before`` read."""
    tree = ast.parse(after)
    torch_imported = {alias.asname or alias.name.split(".")[0]
                      for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                      and node.lineno == node.end_lineno
                      for alias in node.names if _is_torch_import(node, alias)}
    used_after = _names_loaded(tree, torch_imported)
    unused = torch_imported - used_after
    used_before = _names_loaded(ast.parse(before), unused) if unused else set()
    lines = SourceText(after).lines_with_endings()
    for node in reversed(tree.body):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno != node.end_lineno:
            continue
        names = []
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            names.append((alias, _is_torch_import(node, alias) and bound in used_before and bound not in used_after))
        if not any(drop for _, drop in names):
            continue
        line = lines[node.lineno - 1]
        if line[: node.col_offset].strip() or line[node.end_col_offset:].strip():
            continue  # shares its line with other code (`import x; y()`) or a comment: leave it
        kept = [alias for alias, drop in names if not drop]
        if not kept:
            del lines[node.lineno - 1]
            continue
        spelled = ", ".join(a.name + (" as " + a.asname if a.asname else "") for a in kept)
        newline = line[len(line.rstrip("\r\n")):]
        module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
        head = "from %s%s import " % ("." * node.level, module) if isinstance(node, ast.ImportFrom) else "import "
        lines[node.lineno - 1] = line[: node.col_offset] + head + spelled + newline
    return "".join(lines)


def _is_torch_import(node: Union[ast.Import, ast.ImportFrom], alias: ast.alias) -> bool:
    module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
    return module.startswith("torch") or alias.name.startswith("torch")


def _names_loaded(tree: ast.AST, names: Set[str]) -> Set[str]:
    """Which of ``names`` the tree reads (or deletes) as a name; the walk stops once it found them
    all (usually within the first function: ``import torch``)."""
    found: Set[str] = set()
    todo = [tree] if names else []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and node.id in names and not isinstance(node.ctx, ast.Store):
            found.add(node.id)
            if len(found) == len(names):
                break
        todo.extend(ast.iter_child_nodes(node))
    return found
