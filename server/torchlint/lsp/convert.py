"""Core findings <-> LSP types.

The core counts 1-based lines and 0-based code-point columns; LSP counts 0-based lines
and columns in the negotiated encoding (UTF-16 unless the client asked for another).
Lines are split the way the core and the LSP spec split them (``\\n``, ``\\r\\n``, ``\\r``),
so conversions use the core's :class:`SourceText`, never ``str.splitlines``.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from ..analysis.findings import Edit, Finding, Fix, Position, Range, Severity, UncheckedClass
from ..analysis.source import SourceText
from ..rules.base import page_url
from ..rules import ALL_CODES, RULES_BY_CODE

SOURCE = "torchlint"

SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


class Converter:
    """Positions of one text, in the client's units."""

    def __init__(self, source: SourceText, codec: PositionCodec):
        self.source = source
        self.codec = codec

    def position(self, pos: Position) -> types.Position:
        line = min(max(pos.line, 1), self.source.line_count)
        text = self.source.line(line)
        if line != pos.line:  # past the end (a finding kept from a longer text): clamp
            return types.Position(line=line - 1, character=self.codec.client_num_units(text))
        return types.Position(line=line - 1, character=self.codec.client_num_units(text[:pos.column]))

    def range(self, rng: Range) -> types.Range:
        return types.Range(start=self.position(rng.start), end=self.position(rng.end))

    def core_position(self, pos: types.Position) -> Position:
        line = pos.line + 1
        if line > self.source.line_count:
            last = self.source.line_count
            return Position(last, len(self.source.line(last)))
        text = self.source.line(line)
        units = 0
        for column, char in enumerate(text):
            if units >= pos.character:
                return Position(line, column)
            units += self.codec.client_num_units(char)
        return Position(line, len(text))

    def core_range(self, rng: types.Range) -> Range:
        return Range(self.core_position(rng.start), self.core_position(rng.end))

    def whole_text(self) -> types.Range:
        last = self.source.line_count
        return types.Range(start=types.Position(line=0, character=0),
                           end=types.Position(line=last - 1,
                                              character=self.codec.client_num_units(self.source.line(last))))

    def text_edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(range=self.range(edit.range), new_text=edit.new_text)

    def diagnostic(self, finding: Finding, uri: str) -> types.Diagnostic:
        href = rule_href(finding.code)
        return types.Diagnostic(
            range=self.range(finding.range),
            message=finding.message,
            severity=SEVERITIES[finding.severity],
            code=finding.code,
            code_description=types.CodeDescription(href=href) if href else None,
            source=finding.source or SOURCE,
            tags=[types.DiagnosticTag.Deprecated] if finding.deprecated else None,
            related_information=[
                types.DiagnosticRelatedInformation(
                    location=types.Location(uri=uri, range=self.range(related.range)),
                    message=related.message)
                for related in finding.related
            ] or None,
            # The code action handler re-checks the current text and re-finds the fixes by
            # code and range; the titles let a client show them without asking.
            data={"code": finding.code, "fixes": [fix_title(fix) for fix in finding.fixes]},
        )

    def lsp_diagnostics(self, findings: Iterable[Finding], uri: str) -> List[types.Diagnostic]:
        return [self.diagnostic(finding, uri) for finding in findings]

    def unchecked_diagnostic(self, unchecked: Sequence[UncheckedClass]) -> types.Diagnostic:
        """One information, on the first of them, about the classes of a file no rule checked."""
        first = unchecked[0]
        count = len(unchecked)
        bases = sorted({"`%s` (%s)" % (c.base, c.reason) for c in unchecked})
        names = ", ".join(c.name for c in unchecked[:5]) + (" and %d more" % (count - 5) if count > 5 else "")
        message = ("%s of this file not checked (%s): whether %s nn.Modules could not be read, from the base%s %s. "
                   "Install the package that defines %s into the analysed environment, or choose that environment "
                   "with the interpreter setting" % (
                       "1 class" if count == 1 else "%d classes" % count, names,
                       "it is an" if count == 1 else "they are", "" if len(bases) == 1 else "s",
                       ", ".join(bases), "it" if len(bases) == 1 else "them"))
        end = Position(first.position.line, first.position.column + len("class ") + len(first.name))
        return types.Diagnostic(range=self.range(Range(first.position, end)), message=message,
                                severity=types.DiagnosticSeverity.Information, source=SOURCE)


    def cut_short_diagnostic(self, codes: Sequence[str]) -> types.Diagnostic:
        """One information, on the first line, naming the rules that stopped at Python's recursion
        limit: their findings in the file are missing (the CLI says it on stderr and exits 2)."""
        message = ("%s could not check this file: its code is nested deeper than Python's recursion limit lets "
                   "%s follow (a 1,000-deep expression); %s findings here are missing, the other rules ran"
                   % (", ".join(codes), "the rule" if len(codes) == 1 else "the rules",
                      "its" if len(codes) == 1 else "their"))
        return types.Diagnostic(range=self.range(Range(Position(1, 0), Position(1, 0))), message=message,
                                severity=types.DiagnosticSeverity.Information, source=SOURCE)


def rule_href(code: str) -> Optional[str]:
    """The page that explains a code (a diagnostic's codeDescription, the hover's link)."""
    entry = ALL_CODES.get(code)
    if entry is not None:
        return entry.doc_url()
    return page_url("verify") if code.startswith("TL9") else None


def fix_title(fix: Fix) -> str:
    """What the quick-fix menu shows: a fix that may change behaviour says so."""
    return fix.title if fix.is_safe else fix.title + " (unsafe)"


def rule_label(code: str) -> str:
    """A rule's code and name (``TL101 unregistered-tensor``); the code alone for one unknown."""
    rule = RULES_BY_CODE.get(code)
    return "%s %s" % (code, rule.name) if rule is not None else code


def menu_order(fix: Fix) -> Tuple[bool, bool]:
    """Sort key of a finding's fixes as the quick-fix menu lists them: the safe ones, then the
    unsafe ones, the rule's preferred fix first in its group, the others in the rule's order."""
    return not fix.is_safe, not fix.preferred


def hover_card(finding: Finding, markdown: bool = True, attribute: Optional[str] = None) -> str:
    """One short card of what the diagnostic does not say (the editor shows its sentence already):
    the rule's code and name, what the attribute is to torch (``attribute``, a line in the card's
    markup), one line of why (the rule's summary), every fix with whether it is safe, in the
    quick-fix menu's order, and a link to the rule's page."""
    rule = RULES_BY_CODE.get(finding.code)
    href = rule_href(finding.code)
    code, why, fixes_label = ("**%s**", "*Why:*", "*Fixes:*") if markdown else ("%s", "Why:", "Fixes:")
    lines = [code % rule_label(finding.code)]
    if attribute:
        lines.append(attribute)
    if rule is not None:
        lines.append("%s %s" % (why, rule.summary))
    if finding.fixes:
        lines.append("\n".join([fixes_label] + ["- %s (%s)" % (fix.title, "safe" if fix.is_safe else "unsafe")
                                                 for fix in sorted(finding.fixes, key=menu_order)]))
    if href and markdown:
        lines.append("[Rule page: %s](%s)" % (finding.code, href))
    elif href:
        lines.append("Rule page: %s" % href)
    return "\n\n".join(lines)


def workspace_edit(uri: str, edits: List[types.TextEdit], version: Optional[int],
                   document_changes: bool) -> types.WorkspaceEdit:
    """Edits of one document, versioned when the client takes ``documentChanges``."""
    return documents_edit({uri: (version, edits)}, document_changes)


def documents_edit(edits: Dict[str, Tuple[Optional[int], List[types.TextEdit]]],
                   document_changes: bool) -> types.WorkspaceEdit:
    """Edits of several documents (uri -> (version, edits)): the cells of a notebook."""
    if document_changes:
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=document_edits) for uri, (version, document_edits) in edits.items()])
    changes: Dict[str, List[types.TextEdit]] = {uri: document_edits for uri, (_, document_edits) in edits.items()}
    return types.WorkspaceEdit(changes=changes)


def shares_a_line(a: Range, b: Range) -> bool:
    """Whether two ranges touch a common line: a cursor anywhere on a flagged line asks
    for that line's fixes (what Neovim sends, and what a lightbulb on the line means)."""
    return a.start.line <= b.end.line and b.start.line <= a.end.line
