"""Differential fuzzer: the editor's incremental check against a full check, after every edit.

Random programs mix Module classes and training functions with module-level script code (a
model built in one statement, an optimizer in another, a layer replaced or ``.data`` assigned in
a third, the optimizer used in a fourth), which is where a finding's evidence lies in other
top-level statements. Each program is edited many times the way people type (lines inserted,
deleted, commented out and back, keystrokes, lines moved); after every edit the incremental
result must equal ``check_source`` of the same text, finding for finding.

    python benchmarks/fuzz_incremental.py --programs 200 --edits 60 --seed 1

prints the edits checked, how many were incremental, and every edit where the two differ (the
text before and after is written under --out for a failing edit). tests/test_incremental.py
runs a short fixed-seed round of the same fuzzer.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))

from torchlint.engine import CheckOptions, check_source  # noqa: E402
from torchlint.incremental import IncrementalChecker  # noqa: E402

HEADER = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n\n"

CLASS = '''class Net{n}(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.scale = width ** -0.5
{extra}
    def forward(self, x):
        x = self.norm(self.fc(x))
        return x * self.scale


'''

CLASS_EXTRAS = [
    "        self.mask = torch.tril(torch.ones(4, 4))\n",
    "        self.blocks = [nn.Linear(4, 4) for _ in range(2)]\n",
    "        self.gain = nn.Parameter(torch.ones(4)).cuda()\n",
    "        self.register_buffer(\"steps\", torch.zeros(1))\n",
    "        self.unused = nn.Linear(4, 4)\n",
    "",
]

FUNCTION = '''def train{n}(model, data):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in data:
        loss = model(x).sum()
        loss.backward()
        opt.step()
{extra}    return model


'''

FUNCTION_EXTRAS = [
    "    model.fc = nn.Linear(4, 4)\n    opt.step()\n",
    "    model.fc.weight.data = torch.randn(4, 4)\n",
    "    model.fc.weight = torch.randn(4, 4)\n",
    "    x.cuda()\n",
    "",
]

# Module-level script lines: each may make, grade or remove a finding on another one.
SCRIPT = [
    "model = Net{n}()\n",
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
    "opt = torch.optim.Adam([w], lr=0.1)\n",
    "model.fc = nn.Linear(4, 4)\n",
    "model.fc.weight.data = torch.randn(4, 4)\n",
    "model.fc.weight.data = other.fc.weight.data\n",
    "model.fc.weight = torch.randn(4, 4)\n",
    "model.fc.weight = nn.Parameter(torch.randn(4, 4))\n",
    "other = Net{n}()\n",
    "w = torch.randn(3, requires_grad=True)\n",
    "w = torch.randn(3, requires_grad=True).cuda()\n",
    "w = w * 0.01\n",
    "x = torch.randn(2, 4)\n",
    "x.cuda()\n",
    "model.cuda()\n",
    "p = nn.Parameter(torch.randn(3)).cuda()\n",
    "opt.step()\n",
    "opt.zero_grad()\n",
    "loss = model(x).sum()\n",
    "loss.backward()\n",
    "print(w.grad)\n",
    "model = train{n}(model, [x])\n",
    "if x.is_cuda:\n    model.fc = nn.Linear(4, 4)\n",
    "for _ in range(3):\n    opt.step()\n",
    "with torch.no_grad():\n    model.fc.weight.copy_(torch.randn(4, 4))\n",
    "del opt\n",
]

KEYS = ["a", "x", " ", "(", ")", "_1", ".", ":", "#"]


def _pick(rng: random.Random, items: List[str], classes: int) -> str:
    return rng.choice(items).replace("{n}", str(rng.randrange(classes)))


def make_program(rng: random.Random) -> str:
    """Classes and functions (most of the lines, so that edits stay incremental) with runs of
    script lines between them and at the end."""
    classes = rng.randint(3, 8)
    parts = [HEADER]
    for n in range(classes):
        parts.append(CLASS.format(n=n, extra=rng.choice(CLASS_EXTRAS)))
        if rng.random() < 0.6:
            parts.append(FUNCTION.format(n=n, extra=rng.choice(FUNCTION_EXTRAS)))
        if n and rng.random() < 0.5:
            parts.extend(_pick(rng, SCRIPT, n) for _ in range(rng.randint(1, 3)))
            parts.append("\n\n")
    parts.append("model = Net0()\n")
    parts.extend(_pick(rng, SCRIPT, classes) for _ in range(rng.randint(3, 8)))
    return "".join(parts).replace("train{n}", "train0")


def _top_level_lines(lines: List[str]) -> List[int]:
    """Where a new top-level statement may go: before an unindented line, or at the end."""
    return [i for i, line in enumerate(lines) if line[:1] not in (" ", "\t", "\n", "")] + [len(lines)]


def edit(text: str, rng: random.Random, classes: int = 4) -> str:
    lines = text.splitlines(True) or ["\n"]
    roll = rng.random()
    if roll < 0.35:  # a script line typed at module level
        i = rng.choice(_top_level_lines(lines))
        lines.insert(i, _pick(rng, SCRIPT, classes))
    elif roll < 0.5:
        del lines[rng.randrange(len(lines))]
    elif roll < 0.65:  # commented out, or back in
        i = rng.randrange(len(lines))
        line = lines[i]
        if line.startswith("# "):
            lines[i] = line[2:]
        elif line.strip():
            indent = len(line) - len(line.lstrip())
            lines[i] = line[:indent] + "# " + line[indent:]
    elif roll < 0.8:  # a keystroke
        i = rng.randrange(len(lines))
        line = lines[i]
        if line.strip():
            j = rng.randrange(len(line))
            lines[i] = line[:j] + rng.choice(KEYS) + line[j + 1:]
    elif roll < 0.9:  # a line duplicated below itself
        i = rng.randrange(len(lines))
        lines.insert(i + 1, lines[i])
    else:  # a top-level line moved
        tops = [i for i in _top_level_lines(lines) if i < len(lines) and "\n" in lines[i]]
        if tops:
            line = lines.pop(rng.choice(tops))
            lines.insert(rng.choice(_top_level_lines(lines)), line)
    return "".join(lines)


@dataclass
class Mismatch:
    program: int
    step: int
    before: str
    after: str
    plan: object
    missing: list
    extra: list


@dataclass
class Outcome:
    edits: int = 0  # edited versions that parse, checked both ways
    incremental: int = 0  # of those, checked incrementally
    full_because: Counter = field(default_factory=Counter)  # the others: why a full check ran
    mismatches: List[Mismatch] = field(default_factory=list)


def fuzz(seed: int, programs: int, edits: int, options: CheckOptions = CheckOptions(),
         outcome: Optional[Outcome] = None) -> Outcome:
    rng = random.Random(seed)
    outcome = outcome or Outcome()
    for number in range(programs):
        text = make_program(rng)
        checker = IncrementalChecker("script.py")
        good: Optional[str] = None
        for step in range(edits):
            got = checker.check(text, options)
            want = check_source(text, "script.py", options)
            if want.parse_error is None:
                if step:
                    outcome.edits += 1
                    outcome.incremental += not checker.last_plan.full
                    if checker.last_plan.full:
                        outcome.full_because[checker.last_plan.reason] += 1
                if got.findings != want.findings:
                    outcome.mismatches.append(Mismatch(
                        number, step, good or "", text, checker.last_plan,
                        sorted(set(want.findings) - set(got.findings), key=str),
                        sorted(set(got.findings) - set(want.findings), key=str)))
                good = text
            elif good is not None and rng.random() < 0.7:
                text = good  # the next keystrokes mostly mend a syntax error
            text = edit(text, rng)
    return outcome


def describe(mismatch: Mismatch) -> str:
    def line(finding) -> str:
        return "%d:%d %s [%s] %s" % (finding.range.start.line, finding.range.start.column, finding.code,
                                     finding.severity.name.lower(), finding.message[:70])
    return "program %d, edit %d (%s): missing %s; extra %s" % (
        mismatch.program, mismatch.step, mismatch.plan.reason, [line(f) for f in mismatch.missing],
        [line(f) for f in mismatch.extra])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write each failing edit's texts here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcome = fuzz(args.seed, args.programs, args.edits)
    took = time.perf_counter() - started
    print("%d programs, %d edits that parse checked both ways, %d incremental (%.0f%%), %d differ; %.1f s"
          % (args.programs, outcome.edits, outcome.incremental, 100.0 * outcome.incremental / max(outcome.edits, 1),
             len(outcome.mismatches), took))
    for reason, count in outcome.full_because.most_common():
        print("  full check: %d, %s" % (count, reason))
    for index, mismatch in enumerate(outcome.mismatches):
        print("  " + describe(mismatch))
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / ("%03d-before.py" % index)).write_text(mismatch.before)
            (args.out / ("%03d-after.py" % index)).write_text(mismatch.after)
    return 1 if outcome.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
