"""The editor set-up pages (docs/*.md) give configurations that parse and start ``torchlint serve``.

The pages are read as a user copies them: each fenced block is parsed by the format the editor
reads (JSON, TOML, Python for jupyter_server_config.py), and what it would run must be the
server's command. The JupyterLab entry is checked for the keys jupyter-lsp's version-2 server
spec needs, the ``.json`` and ``.py`` forms against each other. No editor runs here."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli is a dependency there (pyproject.toml's marker)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EDITOR_PAGES = ["jupyterlab.md", "kate.md", "helix.md", "zed.md", "sublime-text.md", "pycharm.md"]
SERVER_COMMAND = ["torchlint", "serve"]


def blocks(page: str, language: str) -> List[str]:
    """The fenced blocks of one language in a docs page, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(r"^```%s\n(.*?)^```" % re.escape(language), text, re.S | re.M)


def jupyter_entry(config: Dict[str, Any]) -> Dict[str, Any]:
    manager = config["LanguageServerManager"]
    assert manager["autodetect"] is False
    return manager["language_servers"]["torchlint"]


@pytest.mark.parametrize("page", EDITOR_PAGES)
def test_every_editor_page_is_linked_from_the_readme_and_says_whether_it_was_tried(page):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/%s)" % page in readme
    opening = (DOCS / page).read_text(encoding="utf-8").split("\n\n")[1]
    assert opening.startswith(("Tried here:", "Not tried here:")), opening


def test_the_jupyterlab_entry_is_a_jupyter_lsp_spec_that_runs_the_server():
    json_entry = jupyter_entry(json.loads(blocks("jupyterlab.md", "json")[0]))
    assert json_entry["argv"] == SERVER_COMMAND
    assert json_entry["version"] == 2
    assert json_entry["languages"] == ["python"]
    assert "text/x-ipython" in json_entry["mime_types"]  # notebooks' cells
    assert json_entry["requires_documents_on_disk"] is False
    assert isinstance(json_entry["display_name"], str)
    # jupyter_server_config.py's form sets the same, on the config object Jupyter passes as c.
    c = SimpleNamespace(LanguageServerManager=SimpleNamespace())
    exec(compile(blocks("jupyterlab.md", "python")[0], "jupyter_server_config.py", "exec"), {"c": c})
    py_config = {"LanguageServerManager": vars(c.LanguageServerManager)}
    assert jupyter_entry(py_config) == json_entry


def test_the_jupyterlab_settings_block_is_the_torchlint_section():
    settings = json.loads(blocks("jupyterlab.md", "json")[1])
    assert set(settings["language_servers"]["torchlint"]["configuration"]) == {"torchlint"}


def test_the_kate_entries_run_the_server_for_python_documents():
    entries = [json.loads(block)["servers"]["python"] for block in blocks("kate.md", "json")]
    assert len(entries) == 2
    for entry in entries:
        assert entry["command"] == SERVER_COMMAND
        assert re.search(entry["highlightingModeRegex"], "Python")
        assert "pyproject.toml" in entry["rootIndicationFileNames"]
    assert entries[1]["initializationOptions"]["ignore"] == ["TL301"]


def test_the_helix_languages_toml_adds_torchlint_beside_another_server():
    config = tomllib.loads(blocks("helix.md", "toml")[0])
    server = config["language-server"]["torchlint"]
    assert [server["command"]] + server["args"] == SERVER_COMMAND
    (python,) = [language for language in config["language"] if language["name"] == "python"]
    assert "torchlint" in python["language-servers"] and len(python["language-servers"]) == 2
    settings = tomllib.loads(blocks("helix.md", "toml")[1])
    assert settings["language-server"]["torchlint"]["config"]["ignore"] == ["TL301"]


def test_the_zed_extension_declares_the_server_the_settings_name():
    manifest = tomllib.loads(blocks("zed.md", "toml")[0])
    assert manifest["language_servers"]["torchlint"]["languages"] == ["Python"]
    rust = blocks("zed.md", "rust")[0]
    assert 'which("torchlint")' in rust and 'vec!["serve".to_string()]' in rust
    settings = json.loads(blocks("zed.md", "json")[0])
    assert "torchlint" in settings["languages"]["Python"]["language_servers"]
    assert "initialization_options" in settings["lsp"]["torchlint"]


def test_the_sublime_text_client_runs_the_server_on_python_files():
    client = json.loads(blocks("sublime-text.md", "json")[0])["clients"]["torchlint"]
    assert client["command"] == SERVER_COMMAND
    assert client["selector"] == "source.python" and client["enabled"] is True
