"""Jupyter notebooks: the core's cell joining and mapping, and `torchlint check` on .ipynb files."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from torchlint import cli
from torchlint.engine import check_source
from torchlint.analysis.findings import Position
from torchlint.analysis.notebook import (PLACEHOLDER, CellsChanged, CodeCell, NotebookError, join_cells,
                                         read_notebook, split_cells, with_sources)

NOTEBOOKS = Path(__file__).resolve().parent / "fixtures" / "notebooks"
LAYER_SCALE = NOTEBOOKS / "layer_scale.ipynb"
GAMMA_LINE = '"        self.gamma_1 = torch.full((dim,), 1e-2)  # never trained\\n",'

IMPORTS = "import torch\nimport torch.nn as nn"
BLOCK = '''class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = torch.ones(dim)

    def forward(self, x):
        return x * self.gamma
'''


def run(argv, capsys, cwd):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(argv)
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, out, err


def notebook_json(sources, indent=1, language="python") -> str:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": source.splitlines(keepends=True)} for source in sources]
    return json.dumps({"cells": cells, "metadata": {"kernelspec": {"language": language, "name": "k"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=indent) + "\n"


# -- the core --------------------------------------------------------------------------------------
def test_a_class_in_one_cell_is_checked_with_the_imports_of_another():
    joined = join_cells([CodeCell(1, IMPORTS), CodeCell(3, BLOCK)])
    findings = check_source(joined.text, "nb.ipynb").findings
    assert [f.code for f in findings] == ["TL101"]
    cell, position = joined.cells.locate(findings[0].range.start)
    assert (cell, position) == (3, Position(4, 8))  # `self.gamma = ...`: line 4 of cell 3
    # The class alone has no idea what nn is: nothing to report.
    assert check_source(BLOCK, "cell.py").findings == []


def test_ipython_lines_are_placeholders_and_come_back():
    cell = "%matplotlib inline\n!pip list\nfiles = !ls\ntorch.zeros?\n" + IMPORTS + "\n"
    joined = join_cells([CodeCell(1, cell), CodeCell(2, BLOCK)])
    lines = joined.text.split("\n")
    assert [line.strip() for line in lines[:4]] == [PLACEHOLDER] * 4
    assert lines[4] == "import torch"  # line numbers still map
    fixed = joined.text.replace("import torch\n", "import torch\nimport math\n", 1)
    assert split_cells(joined, fixed) == {1: cell.replace("import torch\n", "import torch\nimport math\n")}


def test_cell_magics_and_cells_that_do_not_parse_are_left_out_but_the_rest_is_checked():
    joined = join_cells([CodeCell(1, "%%bash\necho hi"), CodeCell(2, IMPORTS), CodeCell(4, "def f(:\n    pass"),
                         CodeCell(5, BLOCK)])
    assert [number for number, _ in joined.skipped] == [1, 4]
    assert len(joined.errors) == 1
    assert joined.cells.locate(joined.errors[0].position) == (4, Position(1, 6))
    findings = check_source(joined.text, "nb.ipynb").findings
    assert [(f.code, joined.cells.locate(f.range.start)[0]) for f in findings] == [("TL101", 5)]


def test_positions_map_both_ways_and_boundaries_belong_to_the_next_cell():
    joined = join_cells([CodeCell(2, "a = 1\nb = 2"), CodeCell(3, "c = 3\n")])
    cells = joined.cells
    first, second = cells.spans
    assert cells.locate(Position(2, 4)) == (2, Position(2, 4))
    boundary = Position(first.first_line + first.line_count, 0)
    assert cells.cell_position(boundary) == (3, Position(1, 0))  # an insertion there starts cell 3
    assert cells.cell_position(Position(boundary.line, 3)) is None  # inside the boundary line: nowhere
    assert cells.joined_position(3, Position(1, 2)) == Position(second.first_line, 2)
    # past a cell with no final newline an insertion has no place; after one with it, it does
    assert cells.cell_position(Position(second.first_line + 1, 0)) == (3, Position(2, 0))


def test_a_fix_that_breaks_a_cell_boundary_is_refused():
    joined = join_cells([CodeCell(1, "a = 1\n"), CodeCell(2, "b = 2\n")])
    with pytest.raises(CellsChanged):
        split_cells(joined, "a = 1\nb = 2\n")
    magic = join_cells([CodeCell(1, "%time f()\nx = 1\n")])
    with pytest.raises(CellsChanged):
        split_cells(magic, "x = 1\n")  # the IPython line is gone


@pytest.mark.parametrize("indent", [1, 2, 4])
def test_writing_back_changes_only_the_cell_source(indent):
    text = notebook_json([IMPORTS, BLOCK], indent=indent)
    notebook = read_notebook(text.encode("utf-8"))
    new_block = BLOCK.replace("torch.ones(dim)", "nn.Parameter(torch.ones(dim))")
    written = with_sources(notebook, {2: new_block})
    assert json.loads(written) == json.loads(text.replace("torch.ones(dim)", "nn.Parameter(torch.ones(dim))"))
    assert written == text.replace("torch.ones(dim)", "nn.Parameter(torch.ones(dim))")  # the same layout


def test_a_string_source_stays_a_string_and_a_byte_order_mark_stays():
    document = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
                           "source": "x = 1\ny = 2"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    data = b"\xef\xbb\xbf" + json.dumps(document).encode("utf-8")
    notebook = read_notebook(data)
    written = with_sources(notebook, {1: "x = 1\ny = 3"}).encode("utf-8")
    assert written == data.replace(b'y = 2', b'y = 3')


@pytest.mark.parametrize("data, why", [
    (b"{not json", "invalid JSON"),
    (b'{"worksheets": []}', "no \"cells\" list"),
    (b"\xff\xfe", "not valid UTF-8"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1"),
])
def test_what_is_not_a_notebook_says_why(data, why):
    with pytest.raises(NotebookError, match=why):
        read_notebook(data)


# -- the command line -----------------------------------------------------------------------------
def test_check_reports_cell_and_line(capsys):
    code, out, _ = run(["check", "--no-cache", "layer_scale.ipynb"], capsys, NOTEBOOKS)
    assert code == 1
    assert out.splitlines()[0].startswith("layer_scale.ipynb:cell 3:5:9: TL101 ")


def test_json_has_the_cell_and_rows_in_it(capsys):
    code, out, _ = run(["check", "--no-infer", "--format", "json", "layer_scale.ipynb"], capsys, NOTEBOOKS)
    entries = json.loads(out)
    assert code == 1 and len(entries) == 1
    entry = entries[0]
    assert (entry["cell"], entry["code"], entry["location"], entry["end_location"]) == (
        3, "TL101", {"row": 5, "column": 9}, {"row": 5, "column": 48})
    assert {edit["location"]["row"] for edit in entry["fix"]["edits"]} == {5}


def test_fix_rewrites_only_the_fixed_line_of_the_cell(tmp_path, capsys):
    target = tmp_path / "layer_scale.ipynb"
    shutil.copyfile(LAYER_SCALE, target)
    before = target.read_bytes()
    code, out, err = run(["check", "--no-infer", "--fix", "--unsafe-fixes", str(target)], capsys, tmp_path)
    assert code == 0, out + err
    after = target.read_bytes()
    fixed_line = GAMMA_LINE.replace("torch.full((dim,), 1e-2)", "nn.Parameter(torch.full((dim,), 1e-2))")
    assert after == before.replace(GAMMA_LINE.encode(), fixed_line.encode())  # outputs, metadata, indent: kept
    assert before.count(GAMMA_LINE.encode()) == 1
    original, fixed = json.loads(before), json.loads(after)
    for old_cell, new_cell in zip(original["cells"], fixed["cells"]):
        assert {k: v for k, v in old_cell.items() if k != "source"} == {k: v for k, v in new_cell.items()
                                                                        if k != "source"}
    assert fixed["cells"][1]["source"][0] == "%matplotlib inline\n"
    assert not list(tmp_path.glob(".*.tmp"))  # the safe write left no copy behind
    code, out, _ = run(["check", "--no-infer", str(target)], capsys, tmp_path)
    assert code == 0 and "All checks passed!" in out


def test_diff_names_the_cell_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "layer_scale.ipynb"
    shutil.copyfile(LAYER_SCALE, target)
    code, out, _ = run(["check", "--no-infer", "--diff", "--unsafe-fixes", "layer_scale.ipynb"], capsys, tmp_path)
    assert code == 1
    assert out.startswith("--- layer_scale.ipynb:cell 3\n+++ layer_scale.ipynb:cell 3\n")
    assert "+        self.gamma_1 = nn.Parameter(torch.full((dim,), 1e-2))  # never trained" in out
    assert target.read_bytes() == LAYER_SCALE.read_bytes()


def test_folders_are_walked_for_notebooks_and_bad_ones_do_not_stop_the_others(tmp_path, capsys):
    (tmp_path / "good.ipynb").write_text(notebook_json([IMPORTS, BLOCK]))
    (tmp_path / "broken.ipynb").write_text('{"cells": [')
    (tmp_path / "r.ipynb").write_text(notebook_json([IMPORTS, BLOCK], language="R"))
    checkpoints = tmp_path / ".ipynb_checkpoints"
    checkpoints.mkdir()
    (checkpoints / "good-checkpoint.ipynb").write_text(notebook_json([IMPORTS, BLOCK]))
    code, out, _ = run(["check", "--no-infer", "."], capsys, tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("broken.ipynb:1:1: not a notebook: invalid JSON")
    assert lines[1].startswith("good.ipynb:cell 2:4:9: TL101 ")
    assert "checkpoint" not in out and "r.ipynb" not in out  # an R notebook is not ours


def test_a_cell_that_does_not_parse_is_reported_and_the_others_checked(tmp_path, capsys):
    (tmp_path / "nb.ipynb").write_text(notebook_json([IMPORTS, "def broken(:\n", BLOCK]))
    code, out, _ = run(["check", "--no-infer", "nb.ipynb"], capsys, tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 2:1:") and lines[0].endswith(": SyntaxError: invalid syntax")
    assert lines[1].startswith("nb.ipynb:cell 3:4:9: TL101 ")


def test_sarif_and_github_name_the_cell_not_a_line_of_the_json(capsys):
    code, out, _ = run(["check", "--no-infer", "--format", "github", "layer_scale.ipynb"], capsys, NOTEBOOKS)
    assert code == 1
    assert out.startswith("::warning title=torchlint (TL101),file=layer_scale.ipynb::cell 3, line 5, column 9: TL101 ")
    code, out, _ = run(["check", "--no-infer", "--format", "sarif", "layer_scale.ipynb"], capsys, NOTEBOOKS)
    (result,) = json.loads(out)["runs"][0]["results"]
    assert result["message"]["text"].startswith("cell 3, line 5, column 9: ")
    assert "region" not in result["locations"][0]["physicalLocation"] and "fixes" not in result


def test_fix_changes_every_cell_it_needs_and_keeps_their_ipython_lines(tmp_path, capsys):
    legacy_imports = "%matplotlib inline\nimport torch\nfrom torch.autograd import Variable"
    target = tmp_path / "legacy.ipynb"
    target.write_text(notebook_json([legacy_imports, "w = torch.FloatTensor([1.0, 2.0])\nv = Variable(w)\n",
                                     "!ls\nprint(w)"]))
    code, out, err = run(["check", "--no-infer", "--fix", "legacy.ipynb"], capsys, tmp_path)
    assert code == 0, out + err
    sources = ["".join(cell["source"]) for cell in json.loads(target.read_text())["cells"]]
    assert sources == ["%matplotlib inline\nimport torch",
                       "w = torch.tensor([1.0, 2.0], dtype=torch.float32)\nv = w.detach()\n", "!ls\nprint(w)"]


def test_messages_name_the_cell_of_the_lines_they_mention():
    joined = join_cells([
        CodeCell(1, "%load_ext autoreload"),
        CodeCell(2, "import torch\nimport torch.nn as nn\nmodel = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))\n"
                    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"),
        CodeCell(4, "model[1] = nn.Linear(2, 4)\nfor x in range(3):\n    optimizer.step()\n")])
    (finding,) = check_source(joined.text, "nb.ipynb").findings
    assert finding.code == "TL202" and "on line 6 " in finding.message  # the joined text's line
    relabelled = joined.cells.relabel(finding)
    assert "on cell 2, line 4 " in relabelled.message
    assert any("(move cell 2, line 4)" in fix.title for fix in relabelled.fixes)
    assert joined.cells.name_lines("see line 8", here=4) == "see line 1"
