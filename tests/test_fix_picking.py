"""What ``--fix`` costs as the fixes in a file grow (issue 49, item 5: 6,000 fixes in one file took
963 s): which fixes one pass applies together (``fixing._pick_edits``) is the choice of comparing
every fix with every other, in work that grows as n log n, not n²; the passes run with the cyclic
collector paused; and tidying a thousand adjacent ``no_grad`` blocks costs a few parses, not one
per merge."""
from __future__ import annotations

import gc
import random
import sys
from typing import List, Sequence, Tuple

from torchlint.analysis.findings import Applicability, Edit, Finding, Fix, Range, Severity
from torchlint import fixing
from torchlint.engine import check_source
from torchlint.fixing import _pick_edits

BLOCK = '''

class Block{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(3, 3))

    def forward(self, x):
        return x * self.mask
'''


def blocks(n: int) -> str:
    """N Modules, each with one finding --fix applies (TL101's non-persistent buffer)."""
    return "import torch\nfrom torch import nn\n" + "".join(BLOCK.format(i=i) for i in range(n))


def lines_run(work) -> int:
    """The lines of Python ``work()`` runs, its callees' included: a count of work, not a time."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(previous)
    return count


def test_picking_four_times_the_fixes_costs_about_four_times_the_work():
    work = {}
    for n in (100, 400):
        findings = check_source(blocks(n), "blocks.py").findings
        assert sum(f.fix_to_apply() is not None for f in findings) == n
        work[n] = lines_run(lambda: _pick_edits(findings, False, "\n"))
        assert len(_pick_edits(findings, False, "\n")[1]) == n
    # n log n gives about 4.8x here; comparing every pair (n²) gave 16x.
    assert work[400] < 8 * work[100], work


# -- the same choice as comparing every pair ------------------------------------------------

def collide(a: Edit, b: Edit) -> bool:
    """Two edits that cannot be applied in one pass, as --fix always decided it."""
    if a.range.start == a.range.end == b.range.start == b.range.end:
        return True  # two insertions at one place
    return a.range.start < b.range.end and b.range.start < a.range.end


def pick_by_pairs(findings: Sequence[Finding]) -> Tuple[List[Edit], List[Finding]]:
    """The choice made by comparing each fix's edits with every edit taken before it."""
    taken: List[Edit] = []
    applied: List[Finding] = []
    for finding in findings:
        fix = finding.fix_to_apply(False)
        if fix is None:
            continue
        fresh = [edit for edit in fix.edits if edit not in taken]
        if any(collide(edit, other) for edit in fresh for other in taken):
            continue
        taken.extend(fresh)
        applied.append(finding)
    return taken, applied


def edit(line: int, col: int, end_line: int, end_col: int, text: str = "x") -> Edit:
    return Edit(Range.of(line, col, end_line, end_col), text)


def finding(*edits: Edit, safe: bool = True) -> Finding:
    applicability = Applicability.SAFE if safe else Applicability.UNSAFE
    return Finding("TL101", "m", Severity.WARNING, edits[0].range, (Fix("fix", applicability, edits),))


def applied(findings: Sequence[Finding]) -> List[int]:
    chosen = _pick_edits(findings, False, "\n")[1]
    return [i for i, f in enumerate(findings) if any(f is g for g in chosen)]  # equal findings are two


def test_overlapping_fixes_wait_and_touching_ones_do_not():
    cases = [
        ([edit(1, 0, 1, 5), edit(1, 5, 1, 9)], [0, 1]),  # touching ranges
        ([edit(1, 0, 1, 5), edit(1, 4, 1, 9)], [0]),  # overlapping ranges
        ([edit(1, 0, 3, 0), edit(2, 0, 2, 1)], [0]),  # one inside the other, over lines
        ([edit(2, 0, 2, 1), edit(1, 0, 3, 0)], [0]),  # the same, the inner one first
        ([edit(1, 3, 1, 3, "a"), edit(1, 3, 1, 3, "b")], [0]),  # two insertions at one place
        ([edit(1, 3, 1, 3, "a"), edit(1, 3, 1, 3, "a")], [0, 1]),  # the same insertion: once
        ([edit(1, 0, 1, 5), edit(1, 5, 1, 5)], [0, 1]),  # an insertion at a range's end
        ([edit(1, 0, 1, 5), edit(1, 0, 1, 0)], [0, 1]),  # ... and at its start
        ([edit(1, 0, 1, 5), edit(1, 2, 1, 2)], [0]),  # an insertion inside a range
        ([edit(1, 2, 1, 2), edit(1, 0, 1, 5)], [0]),  # a range around an insertion
    ]
    for edits, expected in cases:
        findings = [finding(e) for e in edits]
        assert applied(findings) == expected, edits
    # A fix waits whole when one of its edits collides; an unsafe one is not applied at all.
    two = [finding(edit(1, 0, 1, 1)), finding(edit(3, 0, 3, 1), edit(1, 0, 1, 1, "y")),
           finding(edit(3, 0, 3, 1), safe=False), finding(edit(3, 0, 3, 1))]
    assert applied(two) == [0, 3]
    # Two fixes adding the same import take it once.
    same_import = [finding(edit(5, 0, 5, 1), edit(1, 0, 1, 0, "import torch\n")),
                   finding(edit(6, 0, 6, 1), edit(1, 0, 1, 0, "import torch\n"))]
    edits, chosen = _pick_edits(same_import, False, "\n")
    assert len(chosen) == 2 and [e.new_text for e in edits].count("import torch\n") == 1


def test_random_fixes_get_the_choice_of_comparing_every_pair():
    rng = random.Random(49)
    for _ in range(300):
        findings = []
        for _ in range(rng.randint(1, 30)):
            edits = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                line, col = rng.randint(1, 4), rng.randint(0, 6)
                end_line, end_col = line + rng.randint(0, 1), rng.randint(0, 6)
                if rng.random() < 0.35:  # an insertion
                    end_line, end_col = line, col
                if (end_line, end_col) < (line, col):
                    end_line, end_col = line, col + rng.randint(1, 3)
                edits.append(edit(line, col, end_line, end_col, rng.choice("ab")))
            findings.append(finding(*edits))
        assert _pick_edits(findings, False, "\n") == pick_by_pairs(findings)


def test_the_passes_of_fix_text_run_with_the_cyclic_collector_paused(monkeypatch):
    # Between its checks fix_text parses the new text twice more (tidy_after_fixes) while holding the
    # last check's trees and findings: with the collector on, 6,000 fixes took 3x as long.
    seen = []
    real_tidy = fixing.tidy_after_fixes

    def tidy(before: str, after: str, codes=None) -> str:
        seen.append(gc.isenabled())
        return real_tidy(before, after, codes)

    monkeypatch.setattr(fixing, "tidy_after_fixes", tidy)
    assert gc.isenabled()
    assert fixing.fix_text(blocks(2), "blocks.py").fixed == 2
    assert seen == [False] and gc.isenabled()


def test_tidying_merges_blocks_in_handlers_and_cases_and_drops_only_imports_left_unused():
    # tidy_after_fixes walks statements only, a level of the tree at a time, and stops looking for a
    # name once it is found: the blocks of an except handler and of a match case are still merged.
    before = ("import torch\nfrom torch.autograd import Variable\n\n\ndef f(a, b, x, k):\n"
              "    try:\n        pass\n    except ValueError:\n        a.data = x\n        b.data = x\n"
              "    match k:\n        case 1:\n            a.data = x\n            b.data = x\n"
              "    return Variable(x)\n")
    copies = "with torch.no_grad():\n{0}    a.copy_(x)\n{0}with torch.no_grad():\n{0}    b.copy_(x)\n"
    after = before.replace("        a.data = x\n        b.data = x\n", "        " + copies.format("        ")) \
        .replace("            a.data = x\n            b.data = x\n", "            " + copies.format("            ")) \
        .replace("Variable(x)", "x")
    assert fixing.tidy_after_fixes(before, after) == (
        "import torch\n\n\ndef f(a, b, x, k):\n"
        "    try:\n        pass\n    except ValueError:\n"
        "        with torch.no_grad():\n            a.copy_(x)\n            b.copy_(x)\n"
        "    match k:\n        case 1:\n"
        "            with torch.no_grad():\n                a.copy_(x)\n                b.copy_(x)\n"
        "    return x\n")


def copies(n: int) -> Tuple[str, str]:
    """A file assigning N weights' ``.data`` in a row, and the same after TL201's fixes, before tidying."""
    head = "import torch\n\n\ndef reset(x, layers):\n"
    before = head + "".join("    layers[%d].weight.data = x\n" % i for i in range(n))
    after = head + "".join("    with torch.no_grad():\n        layers[%d].weight.copy_(x)\n" % i for i in range(n))
    return before, after


def test_merging_four_times_the_blocks_costs_about_four_times_the_work():
    work = {}
    for n in (50, 200):
        before, after = copies(n)
        tidied = fixing.tidy_after_fixes(before, after)
        assert tidied.count("no_grad") == 1 and tidied.count("copy_") == n
        work[n] = lines_run(lambda: fixing.tidy_after_fixes(before, after))
    # Merged one pair at a time, each merge parsing and walking the whole file again: 16x.
    assert work[200] < 8 * work[50], work


def test_tidying_a_file_with_form_feeds_changes_the_lines_the_tree_names():
    # str.splitlines breaks at a form feed too, which put the lines changed one out of step with the
    # tree's: the merge deleted the line above the header (no longer parsing: nothing was tidied)...
    before, after = copies(2)
    head = "from torch.autograd import Variable\n\x0c\n"
    assert fixing.tidy_after_fixes(head + before.replace("= x\n", "= Variable(x)\n", 1), head + after) == (
        "\x0c\nimport torch\n\n\ndef reset(x, layers):\n"
        "    with torch.no_grad():\n        layers[0].weight.copy_(x)\n        layers[1].weight.copy_(x)\n")
    # ... and the unused import stayed, its form feed's line break deleted instead.
    before, after = copies(1)
    head = "import torch\n\x0c\nfrom torch.autograd import Variable\n"
    assert fixing.tidy_after_fixes(head + before.replace("= x\n", "= Variable(x)\n"), head + after) == (
        "import torch\n\x0c\n" + after)
