"""Write what the editor is told about the settings from their declaration (torchlint.settings).

package.json's ``contributes.configuration.properties`` is :func:`torchlint.settings.vscode_schema`
(presentation keys package.json adds to an entry, such as ``order``, are kept), and the settings
tables of the extension's README (client-vscode/README.md) and docs/vscode.md, between marker
comments, are rewritten whole: each setting VS Code offers, its default and its description.
So a new setting is its declaration (and the code that reads it), then this tool.

    .venv/bin/python tools/settings_docs.py           # rewrite package.json and the tables
    .venv/bin/python tools/settings_docs.py --check   # exit 1 when anything is out of date

tests/test_settings_docs.py runs ``--check``.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))  # torchlint from this source tree, installed or not

from torchlint.settings import vscode_schema  # noqa: E402

PACKAGE = ROOT / "package.json"
TABLES = [ROOT / "client-vscode" / "README.md", ROOT / "docs" / "vscode.md"]
_BLOCK = re.compile(r"(<!-- settings table: written by tools/settings_docs\.py -->\n)(?P<body>.*?)"
                    r"(<!-- end of settings table -->)", re.S)


def package_text(text: str) -> str:
    """package.json's text with its configuration properties as the declaration says."""
    package = json.loads(text)
    properties = package["contributes"]["configuration"]["properties"]
    written: Dict[str, Any] = {}
    for name, entry in vscode_schema().items():
        kept = {key: value for key, value in properties.get(name, {}).items() if key not in entry}
        written[name] = {**entry, **kept}
    package["contributes"]["configuration"]["properties"] = written
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


def _what_it_does(entry: Dict[str, Any]) -> str:
    """The description, then the allowed values (with what each means, where declared)."""
    values = ["`%s`" % value for value in entry.get("enum", [])]
    if entry.get("enumDescriptions"):
        values = ["%s: %s" % (value, meaning.rstrip(".")) for value, meaning in zip(values, entry["enumDescriptions"])]
    text = entry["description"] + (" Values: %s." % "; ".join(values) if values else "")
    return text.replace("|", "\\|")


def table() -> str:
    rows = ["| Setting | Default | What it does |", "| --- | --- | --- |"]
    for name, entry in vscode_schema().items():
        rows.append("| `%s` | `%s` | %s |" % (name, json.dumps(entry["default"]), _what_it_does(entry)))
    return "\n".join(rows) + "\n"


def tables_text(text: str, path: Path) -> str:
    """A document's text with its settings table as the declaration says."""
    rendered, count = _BLOCK.subn(lambda match: match.group(1) + table() + match.group(3), text)
    if count != 1:
        raise SystemExit("%s: expected one settings table between its markers, found %d" % (path, count))
    return rendered


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is out of date; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path, render in [(PACKAGE, package_text)] + [(path, lambda text, p=path: tables_text(text, p))
                                                     for path in TABLES]:
        text = path.read_text(encoding="utf-8")
        wanted = render(text)
        if wanted != text:
            stale.append(path)
            if not args.check:
                path.write_text(wanted, encoding="utf-8")
    for path in stale:
        print("%s: %s" % (path.relative_to(ROOT), "out of date (run tools/settings_docs.py)" if args.check
                          else "rewritten"))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
