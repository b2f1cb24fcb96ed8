"""The .vsix's Details page: the extension's own README (client-vscode/README.md, packaged by
vsce --readme-path), not the repository's. Every relative link and image in it must resolve to
a file inside the .vsix (VS Code resolves them from the extension's folder), absolute ones must
be https; the changelog and the icon are the extension's.

Uses the .vsix of tests/e2e_vscode/test_vscode_extension.py's fixture (built with npm when
missing or stale), so it needs npm: marked `editors`."""
from __future__ import annotations

import json
import posixpath
import re
import zipfile
from urllib.parse import unquote, urlsplit

import pytest

from test_vscode_extension import PACKAGE_LIMIT, ROOT, node_modules, run, vsix  # noqa: F401 (fixtures)

pytestmark = pytest.mark.editors

README = ROOT / "client-vscode" / "README.md"
CHANGELOG = ROOT / "client-vscode" / "CHANGELOG.md"
ICON = ROOT / "client-vscode" / "images" / "icon.png"


@pytest.fixture(scope="module")
def packaged(vsix):  # noqa: F811 (the imported fixture)
    """The .vsix's entries; rebuilt when the README, changelog or icon is newer than it."""
    import os
    if not os.environ.get("TORCHLINT_VSIX") and vsix.stat().st_mtime < max(
            path.stat().st_mtime for path in (README, CHANGELOG, ICON)):
        run(["npm", "run", "package"], PACKAGE_LIMIT)
    return zipfile.ZipFile(vsix)


def markdown_targets(text: str):
    """(is_image, target) of each Markdown link and image and each HTML src/href, outside code."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    for match in re.finditer(r"(!?)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text):
        yield match.group(1) == "!", match.group(2)
    for match in re.finditer(r"<(img|a)\b[^>]*\b(src|href)\s*=\s*[\"']([^\"']+)[\"']", text, re.I):
        yield match.group(1).lower() == "img", match.group(3)
    for match in re.finditer(r"^\s*\[[^\]]+\]:\s*(\S+)", text, re.M):  # reference definitions
        yield False, match.group(1)


def test_the_details_page_is_the_extensions_readme(packaged):
    readme = packaged.read("extension/readme.md").decode("utf-8")
    assert readme == README.read_text(encoding="utf-8")
    assert readme.splitlines()[4] == "# torchlint for VS Code"
    assert packaged.read("extension/changelog.md").decode("utf-8") == CHANGELOG.read_text(encoding="utf-8")
    manifest = json.loads(packaged.read("extension/package.json"))
    assert packaged.read("extension/" + manifest["icon"]) == ICON.read_bytes()
    assert ICON.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(ICON.read_bytes()[16:20], "big") >= 128  # the Marketplace's minimum


def test_every_link_and_image_of_the_packaged_readme_resolves_inside_the_vsix(packaged):
    names = set(packaged.namelist())
    readme = packaged.read("extension/readme.md").decode("utf-8")
    targets = list(markdown_targets(readme))
    assert any(is_image for is_image, _ in targets) and len(targets) > 5, targets
    broken = []
    for is_image, target in targets:
        parts = urlsplit(target)
        if parts.scheme:
            if parts.scheme != "https" and (is_image or parts.scheme not in ("http", "mailto")):
                broken.append((target, "absolute links must be https (images always)"))
            continue
        if not parts.path:  # "#anchor": a heading of the page itself
            continue
        inside = posixpath.normpath(posixpath.join("extension", unquote(parts.path)))
        if inside not in names:
            broken.append((target, "no %s in the .vsix" % inside))
    assert not broken, broken


def test_the_link_checker_sees_what_it_must():
    found = list(markdown_targets('![a](x.png) [b](docs/a%20b.md#h) <img src="https://e.org/i.png"> '
                                  '`[c](not-a-link)`\n[d]: ref.md\n```\n[e](in-code)\n```\n'))
    assert found == [(True, "x.png"), (False, "docs/a%20b.md#h"), (True, "https://e.org/i.png"), (False, "ref.md")]
