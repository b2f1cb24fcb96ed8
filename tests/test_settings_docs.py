"""What the editor is told about the settings is written from their declaration
(tools/settings_docs.py): package.json's configuration and the settings tables of
client-vscode/README.md and docs/vscode.md. A setting declared, changed or removed in
torchlint/settings.py without running the tool fails here."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import settings_docs  # noqa: E402


def test_package_json_and_the_tables_are_as_declared():
    assert settings_docs.main(["--check"]) == 0, "run tools/settings_docs.py"


def test_a_stale_default_in_a_table_is_rewritten():
    path = settings_docs.TABLES[0]
    text = path.read_text(encoding="utf-8")
    stale = text.replace("| `torchlint.verify.timeout` | `120` |", "| `torchlint.verify.timeout` | `60` |")
    assert stale != text and settings_docs.tables_text(stale, path) == text


def test_a_stale_default_in_package_json_is_rewritten():
    text = settings_docs.PACKAGE.read_text(encoding="utf-8")
    stale = text.replace('"default": 120', '"default": 60', 1)
    assert stale != text and settings_docs.package_text(stale) == text
