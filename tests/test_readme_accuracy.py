"""README's accuracy table is what benchmarks/accuracy.py measures on the fixtures today
(`.venv/bin/python benchmarks/accuracy.py --write` rewrites it)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_accuracy():
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", ROOT / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_shows_the_measured_table():
    accuracy = load_accuracy()
    shown = accuracy.readme_table((ROOT / "README.md").read_text(encoding="utf-8"))
    assert shown == accuracy.table(), "run: .venv/bin/python benchmarks/accuracy.py --write"

