"""docs/ARCHITECTURE.md's recipe for a new rule, followed as written: a throw-away rule TL199 (with
a fix) added to a copy of the tree, the commands the recipe names run there, and the tests it
names passing. The repository's own tree is never written; every command has a time bound."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
BOUND = 600  # seconds per command: a cold run of the fixtures' tests on a loaded 2-core machine

RULE = '''\
"""TL199 pass-in-forward: a throw-away rule (tests/test_architecture_recipes.py)."""
from __future__ import annotations

import ast
from typing import Iterator

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Severity
from .base import Rule


class PassInForward(Rule):
    code = "TL199"
    name = "pass-in-forward"
    summary = "`pass` in a Module's forward"
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for cls in ctx.module_classes:
            scope = cls.method_scopes.get("forward")
            for stmt in scope.statements if scope is not None else ():
                if isinstance(stmt, ast.Pass):
                    fix = ctx.fix("Write `...`", [ctx.replace(stmt, "...")], safe=True, preferred=True)
                    yield ctx.finding("`pass` in forward", stmt, [fix])
'''

PAGE = """\
# TL199 pass-in-forward

## What it finds

`pass` in the `forward` of an `nn.Module`.

## Why it is a bug

It is not: this rule is a throw-away that a test adds to a copy of the tree.

## Example

```python
class Net(nn.Module):
    def forward(self, x):
        pass
```

## Fix

Write `...`.
"""

FIXTURE = """\
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x):
        pass  # expect: TL199
        return self.linear(x)
"""


def recipe() -> str:
    """The 'A new rule' item of ARCHITECTURE.md's 'Where a change goes'."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(r"^- \*\*A new rule\*\*(.*?)^- \*\*", text, re.S | re.M)
    assert match, "ARCHITECTURE.md has no 'A new rule' item"
    return " ".join(match.group(1).split())


def copy_tree(to: Path) -> None:
    """What the recipe's files and commands touch: the package, the tools, the README and the
    benchmarks' README (rule_tables reads it), the rule fixtures and the tests that read them."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "server" / "torchlint", to / "server" / "torchlint", ignore=ignore)
    shutil.copytree(ROOT / "tools", to / "tools", ignore=ignore)
    shutil.copytree(ROOT / "tests" / "testkit", to / "tests" / "testkit", ignore=ignore)
    shutil.copytree(ROOT / "tests" / "fixtures" / "rules", to / "tests" / "fixtures" / "rules", ignore=ignore)
    for name in ("README.md", "benchmarks/README.md", "tests/conftest.py", "tests/test_rule_fixtures.py",
                 "tests/test_rules_registry.py"):
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, to / name)


def run(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(tree / "server"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, *args], cwd=tree, env=environment, capture_output=True, text=True,
                          timeout=BOUND, stdin=subprocess.DEVNULL)


def pytest_args(*args: str) -> tuple:
    return ("-m", "pytest", "-q", "-p", "no:cacheprovider", *args)


def test_the_recipe_names_every_step_this_test_takes():
    steps = recipe()
    for step in ("three files written by hand", "rules/tlNNN_short_name.py", "server/torchlint/docs/TLNNN.md",
                 "tests/fixtures/rules/tlNNN_*.py", "# expect: TLNNN", "preferred=True", "tools/rule_tables.py",
                 "UPDATE_SNAPSHOTS=1", "tests/test_rule_fixtures.py -k snapshot", ".fixed.py.snap",
                 ".unsafe-fixed.py.snap", "tests/test_rules_registry.py", "tests/test_architecture_recipes.py"):
        assert step in steps, "ARCHITECTURE.md's recipe for a rule no longer says %r" % step


def test_a_rule_added_as_the_recipe_says_runs_and_passes_the_tests(tmp_path):
    tree = tmp_path / "tree"
    copy_tree(tree)
    # The three files written by hand.
    (tree / "server" / "torchlint" / "rules" / "tl199_pass_in_forward.py").write_text(RULE, encoding="utf-8")
    (tree / "server" / "torchlint" / "docs" / "TL199.md").write_text(PAGE, encoding="utf-8")
    fixture = tree / "tests" / "fixtures" / "rules" / "tl199_pass_in_forward.py"
    fixture.write_text(FIXTURE, encoding="utf-8")

    # The rule runs: found by its file name, its page shown.
    checked = run(tree, "-m", "torchlint", "check", "--no-cache", "--format", "json", "--select", "TL199",
                  str(fixture))
    findings = json.loads(checked.stdout or "null")
    assert checked.returncode == 1 and [f["code"] for f in findings] == ["TL199"], checked.stdout + checked.stderr
    page = run(tree, "-m", "torchlint", "rule", "TL199")
    assert page.returncode == 0 and "pass-in-forward" in page.stdout, page.stdout + page.stderr

    # What the generated files are for: without them the tests the recipe names fail.
    assert run(tree, "tools/rule_tables.py", "--check").returncode == 1
    stale = run(tree, *pytest_args("tests/test_rule_fixtures.py", "-k", "snapshot and tl199"))
    assert stale.returncode == 1 and "no snapshot tl199_pass_in_forward.fixed.py.snap" in stale.stdout, stale.stdout

    # The two commands.
    tables = run(tree, "tools/rule_tables.py")
    assert tables.returncode == 0, tables.stdout + tables.stderr
    written = run(tree, *pytest_args("tests/test_rule_fixtures.py", "-k", "snapshot"), UPDATE_SNAPSHOTS="1")
    assert written.returncode == 0, written.stdout[-3000:]
    snapshots = sorted(p.name for p in (tree / "tests" / "fixtures" / "rules" / "__snapshots__").glob("tl199_*"))
    assert snapshots == ["tl199_pass_in_forward.fixed.py.snap", "tl199_pass_in_forward.unsafe-fixed.py.snap"]
    assert "        ...  # expect: TL199\n" in (tree / "tests" / "fixtures" / "rules" / "__snapshots__" /
                                                 snapshots[0]).read_text(encoding="utf-8")
    readme = (tree / "README.md").read_text(encoding="utf-8")
    assert "| TL199 |" in readme and "TL101-TL199" in readme

    # The tests the recipe names pass (the jedi layer's run of the fixtures: the new one only).
    tested = run(tree, *pytest_args("tests/test_rules_registry.py", "tests/test_rule_fixtures.py",
                                    "-k", "not inference or tl199"))
    assert tested.returncode == 0, tested.stdout[-3000:]
