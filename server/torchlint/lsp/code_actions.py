"""Code actions: quick fixes for the findings on the requested lines (each fix, and "Disable
TLxxx for this line" as a ``# noqa`` comment), and ``source.fixAll.torchlint``, every safe fix
applied pass after pass like ``--fix``. They work on the current text's findings (cached per
version by the scheduler), never on the published ones; a notebook cell's are its notebook's,
through its view (``lsp/views.py``)."""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from lsprotocol import types

from ..analysis.noqa import noqa_edit
from ..engine import CheckOptions
from ..fixing import fix_text
from .convert import fix_title, shares_a_line
from .scheduler import OffLoop, Snapshot
from .views import DocumentView

FIX_ALL_KIND = types.CodeActionKind.SourceFixAll + ".torchlint"
KINDS = [types.CodeActionKind.QuickFix, FIX_ALL_KIND]


def wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether ``context.only`` asks for code actions of ``kind``."""
    if not only:
        return True
    return any(o == "" or kind == o or kind.startswith(o + ".") for o in only)


async def code_actions(view: DocumentView, lsp_range: types.Range, only: Optional[Sequence[str]],
                       document_changes: bool, options: CheckOptions, off_loop: OffLoop,
                       is_current: Callable[[Snapshot], bool],
                       log_error: Callable[[str], None]) -> List[types.CodeAction]:
    """``options``: the document's check options (fix all checks its result again with them);
    ``is_current``: whether the text is still the one analysed (fix all is dropped otherwise)."""
    if view.result.parse_error is not None:
        return []
    actions: List[types.CodeAction] = []
    if wanted(only, types.CodeActionKind.QuickFix):
        actions.extend(quick_fixes(view, lsp_range, document_changes))
    if wanted(only, FIX_ALL_KIND) and any(fix.is_safe for f in view.result.findings for fix in f.fixes):
        action = await fix_all(view, document_changes, options, off_loop, is_current, log_error)
        if action is not None:
            actions.append(action)
    return actions


def quick_fixes(view: DocumentView, lsp_range: types.Range, document_changes: bool) -> List[types.CodeAction]:
    if not view.result.findings:
        return []
    wanted_range = view.core_range(lsp_range)
    actions: List[types.CodeAction] = []
    silenced = set()
    for finding in view.result.findings:
        if not shares_a_line(finding.range, wanted_range):
            continue
        diagnostic = view.diagnostic(finding)
        if diagnostic is None:
            continue
        # shown: the titles as the user's lines are numbered (a notebook's cells)
        for fix, shown in zip(finding.fixes, view.relabel(finding).fixes):
            edit = view.workspace_edit(list(fix.edits), document_changes)
            if edit is not None:  # None: a notebook fix that would cross cells
                actions.append(types.CodeAction(
                    title=fix_title(shown), kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                    is_preferred=fix.preferred or None, edit=edit))
        key = (finding.noqa_line, finding.code)
        noqa = noqa_edit(view.source, finding.noqa_line, finding.code) if key not in silenced else None
        edit = view.workspace_edit([noqa], document_changes) if noqa is not None else None
        if edit is not None:
            silenced.add(key)
            actions.append(types.CodeAction(
                title="Disable %s for this line" % finding.code, kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic], edit=edit))
    return actions


async def fix_all(view: DocumentView, document_changes: bool, options: CheckOptions, off_loop: OffLoop,
                  is_current: Callable[[Snapshot], bool],
                  log_error: Callable[[str], None]) -> Optional[types.CodeAction]:
    """The document (a notebook: its cells) with every safe fix applied, pass after pass like ``--fix``."""
    snap = view.snap
    outcome = await off_loop(fix_text, snap.text, snap.path or "untitled.py", options)
    for error in outcome.errors:
        log_error(error)
    if outcome.text == snap.text or not is_current(snap):
        return None
    edit = view.whole_edit(outcome.text, document_changes)
    if edit is None:
        return None
    return types.CodeAction(title="Fix all safe torchlint problems", kind=FIX_ALL_KIND, edit=edit)
