"""`torchlint verify` as the CLI runs it: cli_command.add_arguments + run(args)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from torchlint.verify import cli_command

from verify_helpers import ROOT, line_of, torch_python, write_module

DEMO = ROOT / "examples" / "verify_demo.py"


def parse(argv):
    parser = argparse.ArgumentParser(prog="torchlint verify")
    cli_command.add_arguments(parser)
    return parser.parse_args(argv)


def test_text_report_of_the_demo(capsys):
    status = cli_command.run(parse([str(DEMO) + "::LayerScaleBlock", "--python", torch_python(),
                                    "--input-shape", "2,5,16", "--device", "cpu"]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_FINDINGS
    line = line_of(DEMO, "self.gamma_1 = torch.full")
    for code in ("TL901", "TL902", "TL903", "TL904"):
        assert "verify_demo.py:%d: %s gamma_1" % (line, code) in out
    assert "device cpu" in out and "float64" in out
    assert "LayerScaleBlock: verified with inputs (2, 5, 16) float32 (from --input-shape)" in out
    assert out.rstrip().splitlines()[-1].startswith("Found 4 problems in 1 class")


def test_json_report_and_no_torch_in_torchlint(tmp_path):
    """Run in a fresh interpreter: the parent side must never import torch."""
    script = (
        "import argparse, sys\n"
        "sys.path.insert(0, %r)\n"
        "from torchlint.verify import cli_command\n"
        "parser = argparse.ArgumentParser()\n"
        "cli_command.add_arguments(parser)\n"
        "status = cli_command.run(parser.parse_args(sys.argv[1:]))\n"
        "assert 'torch' not in sys.modules, 'torchlint imported torch'\n"
        "sys.exit(status)\n" % str(ROOT / "server"))
    result = subprocess.run([sys.executable, "-c", script, str(DEMO), "--python", torch_python(),
                             "--format", "json", "--device", "cpu"], capture_output=True, text=True, timeout=600)
    assert result.returncode == cli_command.EXIT_FINDINGS, result.stderr
    report = json.loads(result.stdout)
    assert report["device"] == "cpu" and report["outcome"] == "completed"
    assert [c["name"] for c in report["classes"]] == ["LayerScaleBlock", "FixedLayerScaleBlock"]
    fixed = report["classes"][1]
    assert fixed["issues"] == [] and {c["status"] for c in fixed["checks"]} == {"passed"}
    assert fixed["inputs"] == "(2, 5, 16) float32 (from example_inputs())"
    assert sorted(i["code"] for i in report["classes"][0]["issues"]) == ["TL901", "TL902", "TL903", "TL904"]
    assert report["issues_total"] == 4
    line = line_of(DEMO, "self.gamma_1 = torch.full")
    assert [i["line"] for i in report["classes"][0]["issues"]] == [line] * 4  # never null
    assert report["classes"][0]["constructed_with"]["origin"] == "defaults"


def test_clean_class_exits_zero(tmp_path, capsys):
    path = write_module(tmp_path, "clean.py", '''
        import torch.nn as nn


        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, x):
                return self.fc(x)
    ''')
    assert cli_command.run(parse([str(path), "--python", torch_python()])) == cli_command.EXIT_CLEAN
    assert "No problems found in 1 class" in capsys.readouterr().out


def test_unknown_class_and_usage_errors_exit_two(tmp_path, capsys):
    path = write_module(tmp_path, "model.py", "import torch\n")
    assert cli_command.run(parse([str(path) + "::Missing", "--python", torch_python()])) == cli_command.EXIT_ERROR
    assert "no class Missing in" in capsys.readouterr().err
    assert cli_command.run(parse([str(path), "--init-kwargs", "[1]"])) == cli_command.EXIT_ERROR
    assert "must be a JSON object" in capsys.readouterr().err


# -- messages that say what happened and what to do (#24), before torch starts where they can --------

NEEDS = '''
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self, dim, depth: "Depth"):  # (an annotation that says nothing: no argument made up)
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            return self.fc(x)


    class Head(nn.Module):
        def __init__(self, width: "Width"):
            super().__init__()
            self.fc = nn.Linear(width, 2)

        def forward(self, x):
            return self.fc(x)
'''
NOT_A_PYTHON = "/nonexistent/python-that-would-fail"  # never started: the checks come first


CLEAN = '''
    import torch.nn as nn


    class Clean(nn.Module):
        def __init__(self, dim=6):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            return self.fc(x)
'''
PLANTED = '''
    import torch
    import torch.nn as nn


    class Scaled(nn.Module):
        def __init__(self, dim=6):
            super().__init__()
            self.fc = nn.Linear(dim, dim)
            self.scale = torch.ones(dim)

        def forward(self, x):
            return self.fc(x) * self.scale
'''


def test_a_folder_is_one_run_reported_per_file_and_class_with_a_total(tmp_path, capsys):
    write_module(tmp_path, "clean.py", CLEAN)
    (tmp_path / "blocks").mkdir()
    planted = write_module(tmp_path / "blocks", "scaled.py", PLANTED)
    write_module(tmp_path, "train.py", "import torch\nprint('training')\n")  # no class: counted, not run
    write_module(tmp_path, "config.py", "class Config:\n    dim = 6\n")  # no nn.Module class
    # The planted file named too, inside the folder walked: verified once.
    status = cli_command.run(parse([str(tmp_path), str(planted), "--python", torch_python(), "--device", "cpu"]))
    captured = capsys.readouterr()
    out = captured.out
    assert status == cli_command.EXIT_FINDINGS, captured.err
    assert "Clean: verified with inputs" in out and "Scaled: verified with inputs" in out
    line = line_of(planted, "self.scale = torch.ones(dim)")
    assert "scaled.py:%d: TL901 scale" % line in out and "scaled.py:%d: TL902 scale" % line in out
    assert out.count("torchlint verify ") == 2  # one report per file with a class, config.py none
    assert out.rstrip().splitlines()[-1].startswith(
        "Total: Found 2 problems in 2 classes in 2 files (2 more without an nn.Module class) in ")
    assert "training" not in out and captured.err == ""


def test_several_paths_in_json_and_the_exit_code_of_a_clean_run(tmp_path, capsys):
    clean = write_module(tmp_path, "clean.py", CLEAN)
    other = write_module(tmp_path, "other.py", CLEAN.replace("Clean", "Other"))
    status = cli_command.run(parse([str(clean), str(other) + "::Other", "--python", torch_python(),
                                    "--format", "json"]))
    data = json.loads(capsys.readouterr().out)
    assert status == cli_command.EXIT_CLEAN
    assert [[c["name"] for c in report["classes"]] for report in data["files"]] == [["Clean"], ["Other"]]
    total = data["total"]
    assert (total["files_verified"], total["classes"], total["verified"], total["issues"]) == (2, 2, 2, 0)


def test_a_named_file_without_a_class_among_several_is_an_error(tmp_path, capsys):
    clean = write_module(tmp_path, "clean.py", CLEAN)
    script = write_module(tmp_path, "script.py", "x = 1\n")
    status = cli_command.run(parse([str(script), str(clean), "--python", torch_python()]))
    captured = capsys.readouterr()
    assert status == cli_command.EXIT_ERROR
    assert "script.py defines no class" in captured.err and "Clean: verified" in captured.out


def test_help_says_files_and_folders(capsys):
    text = argparse.ArgumentParser(prog="torchlint verify")
    cli_command.add_arguments(text)
    shown = text.format_help()
    assert "PATH[::Class]" in shown and "or a folder" in shown and "one file per run" not in shown


def test_a_missing_class_is_named_before_torch_starts(tmp_path, capsys):
    path = write_module(tmp_path, "models.py", NEEDS)
    status = cli_command.run(parse([str(path) + "::Nope", "--python", NOT_A_PYTHON]))
    captured = capsys.readouterr()
    assert status == cli_command.EXIT_ERROR and captured.out == ""
    assert "no class Nope in" in captured.err and "its nn.Module classes: Encoder, Head" in captured.err
    assert "::Encoder" in captured.err


def test_a_file_without_a_class_says_so_before_torch_starts(tmp_path, capsys):
    path = write_module(tmp_path, "script.py", "x = 1\n")
    assert cli_command.run(parse([str(path), "--python", NOT_A_PYTHON])) == cli_command.EXIT_ERROR
    assert "defines no class, so there is nothing to verify" in capsys.readouterr().err


def test_a_file_whose_classes_are_not_modules_says_so(tmp_path, capsys):
    path = write_module(tmp_path, "config.py", "class Config:\n    dim = 3\n")
    status = cli_command.run(parse([str(path), "--python", torch_python()]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_ERROR
    assert "defines no nn.Module subclass (its classes: Config)" in out
    assert out.rstrip().splitlines()[-1].startswith("Nothing verified (")  # the error is not said twice
    assert "stderr" not in out  # no child output for a plain answer


def test_classes_that_all_need_arguments_say_how_to_give_them(tmp_path, capsys):
    path = write_module(tmp_path, "models.py", NEEDS)
    status = cli_command.run(parse([str(path), "--python", torch_python()]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_ERROR
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("Nothing verified: classes Encoder, Head; all need constructor arguments: give them "
                           "with --init-kwargs"), last
    assert "Encoder: skipped: needs arguments (dim, depth: 'Depth')" in out


def test_input_expressions_and_python_kwargs(tmp_path, capsys):
    path = write_module(tmp_path, "lm.py", '''
        import torch.nn as nn


        class TinyLM(nn.Module):
            def __init__(self, vocab, dim):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.out = nn.Linear(dim, vocab)

            def forward(self, tokens):
                return self.out(self.embed(tokens))
    ''')
    status = cli_command.run(parse([str(path), "--python", torch_python(), "--device", "cpu",
                                    "--init-kwargs", "vocab=VOCAB_SIZE_IS_NOT_A_LITERAL"]))
    assert status == cli_command.EXIT_ERROR
    assert "not a Python literal" in capsys.readouterr().err
    status = cli_command.run(parse([str(path), "--python", torch_python(), "--device", "cpu",
                                    "--init-kwargs", "vocab=10, dim=4", "--input", "torch.randint(0, 10, (2, 5))"]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_CLEAN, out
    assert "TinyLM: verified with inputs (2, 5) int64 (from --input)" in out
    assert "built with" in out and "--init-kwargs" in out


def test_verify_table_in_pyproject(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchlint.verify.classes.Wide]\nkwargs = { width = 3 }\n", encoding="utf-8")
    path = write_module(tmp_path, "wide.py", '''
        import torch.nn as nn


        class Wide(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(width, 2)

            def forward(self, x):
                return self.fc(x)
    ''')
    status = cli_command.run(parse([str(path), "--python", torch_python(), "--device", "cpu", "--format", "json"]))
    report = json.loads(capsys.readouterr().out)
    assert status == cli_command.EXIT_CLEAN, report
    built = report["classes"][0]["constructed_with"]
    assert built == {"origin": "[tool.torchlint.verify.classes.Wide] in pyproject.toml", "text": "Wide(width=3)"}
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchlint.verify.classes.Wide]\nkwarg = { width = 3 }\n", encoding="utf-8")
    assert cli_command.run(parse([str(path), "--python", torch_python()])) == cli_command.EXIT_ERROR
    assert "unknown key 'kwarg'" in capsys.readouterr().err


def test_the_flags_are_checked_as_declared(tmp_path, capsys):
    """--timeout is declared with a minimum of 1 s (as the editor's verify.timeout): below it the
    run does not start."""
    path = write_module(tmp_path, "a.py", NEEDS)
    status = cli_command.run(parse([str(path), "--timeout", "0.5", "--python", NOT_A_PYTHON]))
    assert status == cli_command.EXIT_ERROR
    assert "--timeout: expected at least 1, got 0.5" in capsys.readouterr().err
