"""Code actions: what the request asked for, and nothing more.

Quick fixes (each fix, and "Disable TLxxx for this line" as a ``# noqa`` comment) are for the
findings the client names in ``context.diagnostics``; a client that names none of torchlint's
gets those on the first line of the requested range (the cursor's: Kate asks for the whole
file, and every fix of the file would be a menu of edits the user is not looking at). Each
title names its finding (``TL101: Wrap in ...``); a finding's safe fixes come first, and only a
safe fix is preferred (what a client applies without asking), never two whose edits touch.

``source.fixAll.torchlint``, every safe fix applied pass after pass like ``--fix``, comes only
when ``context.only`` asks for it (``source``, ``source.fixAll``...), and then alone: it
rewrites the lines the quick fixes would, so offering both lets a client apply both.

They work on the current text's findings (cached per version by the scheduler), never on the
published ones; a notebook cell's are its notebook's, through its view (``lsp/views.py``)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types

from ..analysis.findings import Edit, Finding, Fix, Position, Range
from ..analysis.noqa import noqa_edit
from ..engine import CheckOptions
from ..fixing import fix_text
from .convert import SOURCE, fix_title, menu_order, shares_a_line
from .scheduler import OffLoop, Snapshot
from .views import DocumentView

FIX_ALL_KIND = types.CodeActionKind.SourceFixAll + ".torchlint"
KINDS = [types.CodeActionKind.QuickFix, FIX_ALL_KIND]


def covers(only: Sequence[str], kind: str) -> bool:
    """Whether one of the kinds ``context.only`` names is ``kind`` or a kind above it."""
    return any(o == "" or kind == o or kind.startswith(o + ".") for o in only)


async def code_actions(view: DocumentView, lsp_range: types.Range, asked: Sequence[types.Diagnostic],
                       only: Optional[Sequence[str]], document_changes: bool, options: CheckOptions,
                       off_loop: OffLoop, is_current: Callable[[Snapshot], bool],
                       log_error: Callable[[str], None]) -> List[types.CodeAction]:
    """``asked``: ``context.diagnostics``; ``options``: the document's check options (fix all
    checks its result again with them); ``is_current``: whether the text is still the one
    analysed (fix all is dropped otherwise)."""
    if view.result.parse_error is not None:
        return []
    if only and covers(only, FIX_ALL_KIND):
        action = await fix_all(view, document_changes, options, off_loop, is_current, log_error)
        return [action] if action is not None else []
    if only and not covers(only, types.CodeActionKind.QuickFix):
        return []
    return quick_fixes(view, findings_asked(view, lsp_range, asked), document_changes)


def findings_asked(view: DocumentView, lsp_range: types.Range, asked: Sequence[types.Diagnostic]) -> List[Finding]:
    """The findings of the diagnostics the client named, or, when it named none of torchlint's,
    those on the first line of the range."""
    named = [(d.code, _at(d.range.start)) for d in asked if d.source == SOURCE]
    if named:
        return [finding for finding in view.result.findings if _named(view, finding, named)]
    line = view.core_range(lsp_range).start.line
    cursor_line = Range(Position(line, 0), Position(line, 0))
    return [finding for finding in view.result.findings if shares_a_line(finding.range, cursor_line)]


def _at(position: types.Position) -> Tuple[int, int]:
    return position.line, position.character


def _named(view: DocumentView, finding: Finding, named: Sequence[Tuple[object, Tuple[int, int]]]) -> bool:
    """Whether a named diagnostic is the finding's: its code, starting within the finding's range
    (a client may send back a range of its own making: Neovim's scripts send the cursor's)."""
    diagnostic = view.diagnostic(finding)
    if diagnostic is None:
        return False
    start, end = _at(diagnostic.range.start), _at(diagnostic.range.end)
    return any(code == diagnostic.code and start <= at <= end for code, at in named)


def quick_fixes(view: DocumentView, findings: Sequence[Finding], document_changes: bool) -> List[types.CodeAction]:
    """Each finding's fixes, the safe ones of every finding first, then its "Disable" action. A fix
    that another finding offers edit for edit is one action naming both diagnostics."""
    fixes: List[Tuple[Fix, types.CodeAction]] = []
    offered: Dict[Tuple[Edit, ...], types.CodeAction] = {}
    preferred: List[Tuple[Edit, ...]] = []  # the edits of the actions marked preferred so far
    disables: List[types.CodeAction] = []
    silenced = set()
    for finding in findings:
        diagnostic = view.diagnostic(finding)
        if diagnostic is None:
            continue
        first_safe = True
        # shown: the titles as the user's lines are numbered (a notebook's cells)
        for fix, shown in safe_first(finding.fixes, view.relabel(finding).fixes):
            same = offered.get(fix.edits)
            if same is not None:
                same.diagnostics = list(same.diagnostics or []) + [diagnostic]
                continue
            edit = view.workspace_edit(list(fix.edits), document_changes)
            if edit is None:  # a notebook fix that would cross cells
                continue
            action = types.CodeAction(title="%s: %s" % (finding.code, fix_title(shown)),
                                      kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic], edit=edit)
            if fix.is_safe and first_safe:
                first_safe = False
                # A client may apply every preferred action at once: never two that edit the same text.
                if not any(touch(fix.edits, other) for other in preferred):
                    action.is_preferred = True
                    preferred.append(fix.edits)
            offered[fix.edits] = action
            fixes.append((fix, action))
        key = (finding.noqa_line, finding.code)
        noqa = noqa_edit(view.source, finding.noqa_line, finding.code) if key not in silenced else None
        edit = view.workspace_edit([noqa], document_changes) if noqa is not None else None
        if edit is not None:
            silenced.add(key)
            disables.append(types.CodeAction(
                title="Disable %s for this line" % finding.code, kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic], edit=edit))
    ordered = [action for fix, action in fixes if fix.is_safe] + [action for fix, action in fixes if not fix.is_safe]
    return ordered + disables


def safe_first(fixes: Sequence[Fix], shown: Sequence[Fix]) -> List[Tuple[Fix, Fix]]:
    """(fix, its title as shown) pairs in the menu's order (:func:`menu_order`)."""
    return sorted(zip(fixes, shown), key=lambda pair: menu_order(pair[0]))


def touch(a: Sequence[Edit], b: Sequence[Edit]) -> bool:
    """Whether two fixes edit the same text (ranges that overlap or meet)."""
    return any(e.range.start <= f.range.end and f.range.start <= e.range.end for e in a for f in b)


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
