"""`# noqa` suppression (flake8/ruff syntax) and the edit that adds one."""
from __future__ import annotations

from textwrap import dedent

from torchlint.engine import check_source
from torchlint.analysis.findings import Position
from torchlint.analysis.noqa import noqa_edit
from torchlint.analysis.source import SourceText, apply_edits

HEADER = dedent("""\
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
    """)


def module_with(*lines: str, header: str = HEADER) -> str:
    """A Module whose __init__ ends with ``lines``."""
    return header + "".join("        %s\n" % line for line in lines)


def codes_by_line(text: str):
    result = check_source(text, "model.py")
    assert result.parse_error is None and not result.internal_errors
    return sorted((f.range.start.line, f.code) for f in result.findings)


FIRST = HEADER.count("\n") + 1  # line number of the first added line


def test_unsuppressed_finding_is_reported():
    assert codes_by_line(module_with("self.mask = torch.ones(3)")) == [(FIRST, "TL101")]


def test_bare_noqa_silences_the_line():
    text = module_with("self.mask = torch.ones(3)  # noqa", "self.other = torch.ones(3)")
    assert codes_by_line(text) == [(FIRST + 1, "TL101")]


def test_noqa_with_the_code():
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # noqa: TL101")) == []


def test_noqa_with_another_code_still_reports():
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # noqa: TL203")) == [(FIRST, "TL101")]


def test_noqa_code_list():
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # noqa: TL101, TL203")) == []
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # noqa: TL203,TL101")) == []


def test_noqa_code_list_leaves_other_codes():
    # TL301 (legacy constructor) and TL101 start on the same line; only TL101 is silenced.
    line = "self.g = torch.cuda.FloatTensor([1.0])  # noqa: TL101, TL203"
    assert codes_by_line(module_with(line)) == [(FIRST, "TL301")]
    assert codes_by_line(module_with("self.g = torch.cuda.FloatTensor([1.0])")) == [(FIRST, "TL101"), (FIRST, "TL301")]


def test_noqa_is_case_insensitive():
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # NOQA")) == []
    assert codes_by_line(module_with("self.mask = torch.ones(3)  # NoQA: tl101")) == []


def test_noqa_on_the_last_line_of_a_multiline_statement():
    text = module_with("self.mask = torch.ones(", "    3,", ")  # noqa: TL101")
    assert codes_by_line(text) == []


def test_file_level_noqa():
    text = "# torchlint: noqa\n" + module_with("self.mask = torch.ones(3)", "self.g = torch.cuda.FloatTensor([1.0])")
    assert codes_by_line(text) == []


def test_file_level_noqa_for_one_code():
    text = "# torchlint: noqa: TL101\n" + module_with("self.g = torch.cuda.FloatTensor([1.0])")
    assert codes_by_line(text) == [(FIRST + 1, "TL301")]


def test_plain_noqa_comment_elsewhere_is_not_file_level():
    # A bare `# noqa` on its own line is flake8's line directive, not torchlint's file one.
    text = "# noqa\n" + module_with("self.mask = torch.ones(3)")
    assert codes_by_line(text) == [(FIRST + 1, "TL101")]


# -- noqa_edit: "disable TLxxx for this line" ------------------------------------------------

def _add(line_text: str, code: str = "TL101"):
    source = SourceText("x = 1\n" + line_text + "\ny = 2\n")
    edit = noqa_edit(source, 2, code)
    if edit is None:
        return None
    return apply_edits(source.text, [edit]).split("\n")[1]


def test_noqa_edit_adds_a_comment():
    assert _add("        self.mask = torch.ones(3)") == "        self.mask = torch.ones(3)  # noqa: TL101"


def test_noqa_edit_drops_trailing_spaces():
    assert _add("self.mask = torch.ones(3)   ") == "self.mask = torch.ones(3)  # noqa: TL101"


def test_noqa_edit_extends_an_existing_list():
    assert _add("self.mask = torch.ones(3)  # noqa: TL203") == "self.mask = torch.ones(3)  # noqa: TL203, TL101"


def test_noqa_edit_keeps_a_comment_after_the_codes():
    assert _add("self.mask = t  # noqa: TL203  why not") == "self.mask = t  # noqa: TL203, TL101  why not"


def test_noqa_edit_on_a_bare_noqa_is_none():
    assert _add("self.mask = torch.ones(3)  # noqa") is None


def test_noqa_edit_when_the_code_is_already_there_is_none():
    assert _add("self.mask = torch.ones(3)  # noqa: TL101") is None


def test_noqa_edit_result_silences_the_finding():
    text = module_with("self.mask = torch.ones(3)  # a comment that stays")
    result = check_source(text, "model.py")
    (finding,) = result.findings
    edit = noqa_edit(SourceText(text), finding.noqa_line, finding.code)
    fixed = apply_edits(text, [edit])
    assert "# a comment that stays  # noqa: TL101" in fixed
    assert codes_by_line(fixed) == []


def test_noqa_edit_keeps_crlf():
    source = SourceText("x = 1\r\nself.m = torch.ones(3)\r\ny = 2\r\n")
    edit = noqa_edit(source, 2, "TL101")
    assert edit.range.start == Position(2, len("self.m = torch.ones(3)"))
    assert apply_edits(source.text, [edit]) == "x = 1\r\nself.m = torch.ones(3)  # noqa: TL101\r\ny = 2\r\n"


# -- only comments count ---------------------------------------------------------------------

def test_noqa_inside_a_string_does_not_silence():
    text = module_with('self.mask = torch.ones(3); self.label = "# noqa"')
    assert codes_by_line(text) == [(FIRST, "TL101")]


def test_noqa_inside_a_multiline_string_does_not_silence():
    text = module_with('self.doc = """first line', '# noqa: TL101 """; self.mask = torch.ones(3)')
    assert codes_by_line(text) == [(FIRST + 1, "TL101")]


def test_file_level_noqa_inside_a_docstring_does_not_silence_the_file():
    text = '"""Module notes.\n# torchlint: noqa\n"""\n' + module_with("self.mask = torch.ones(3)")
    assert codes_by_line(text) == [(FIRST + 3, "TL101")]


def test_file_level_noqa_must_stand_on_its_own_line():
    text = module_with("self.mask = torch.ones(3)  # torchlint: noqa: TL301")  # a line noqa for TL301 only
    assert codes_by_line(text) == [(FIRST, "TL101")]


def test_comment_after_a_string_with_a_hash_still_counts():
    text = module_with('self.mask = torch.ones(3); self.label = "#"  # noqa: TL101')
    assert codes_by_line(text) == []


def test_noqa_comments_in_nested_blocks_decorators_and_after_semicolons():
    text = dedent('''\
        import torch
        import torch.nn as nn


        def deco(f):
            return f


        class Outer(nn.Module):
            """Docs with a # noqa that is not a comment."""

            class Inner(nn.Module):
                @deco
                def __init__(self):  # a comment
                    super().__init__()
                    if True:
                        self.a = torch.ones(3)  # noqa: TL101
                    else:
                        self.b = torch.ones(3); x = """
                # noqa
                """
                    try:
                        pass
                    except (ValueError,
                            TypeError):  # noqa: TL999
                        self.c = torch.ones(3)  # noqa
            ''')
    (b_line,) = [n for n, line in enumerate(text.splitlines(), 1) if "self.b" in line]
    assert codes_by_line(text) == [(b_line, "TL101")]


def test_comments_on_agrees_with_the_tokenizer_on_real_files():
    # Every comment the per-line search finds is the one tokenizing the whole file finds, and no other.
    import ast
    import io
    import tokenize
    from pathlib import Path

    from torchlint.analysis.noqa import comments_on

    root = Path(__file__).resolve().parent.parent
    paths = sorted((root / "server" / "torchlint").rglob("*.py")) + sorted((root / "tests").rglob("*.py"))
    assert len(paths) > 50
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # fixtures that do not parse on purpose
        expected = {token.start[0]: (token.start[1], token.string)
                    for token in tokenize.generate_tokens(io.StringIO(text).readline)
                    if token.type == tokenize.COMMENT}
        source = SourceText(text)
        candidates = [n for n in range(1, source.line_count + 1) if "#" in source.line(n)]
        assert comments_on(source, candidates, tree) == expected, path
        assert comments_on(source, candidates) == expected, path  # without a tree: from the top


def test_noqa_edit_ignores_a_noqa_inside_a_string():
    assert _add('self.mask = torch.ones(3); s = "# noqa: TL203"') == \
        'self.mask = torch.ones(3); s = "# noqa: TL203"  # noqa: TL101'
