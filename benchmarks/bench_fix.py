"""What ``--fix`` costs next to the check alone, as the number of fixes in one file grows.

Generates one file holding N findings that ``--fix`` applies, in a temporary folder, in two shapes:
"buffers", N Module classes, each with TL101's safe fix of a causal mask
(``self.mask = torch.tril(torch.ones(3, 3))``, multiplied with the input in ``forward``: a
non-persistent buffer); "copies", one Module with N layers whose ``reset``
assigns each one's ``weight.data`` in a row (TL201's unsafe fix, ``with torch.no_grad():
....copy_(x)``, N blocks that ``--fix`` then merges into one; the runs give ``--unsafe-fixes``).
For N = 1k, 2k, 6k, best of ``--runs``, it prints: read + ``ast.parse`` of the file in this process
(the floor), ``torchlint check --exit-zero`` and ``torchlint check --fix --exit-zero`` as fresh
processes (the fix on a new copy of the file each run; every run with an empty inference cache),
the ratio of the two, and the findings fixed. Target (issue 49, item 5): ``--fix`` of 6,000 fixes
within 3x the check; a ratio that grows with N is a fix pass that compares every fix with every
other.

    .venv/bin/python benchmarks/bench_fix.py [--sizes 1000,2000,6000] [--shapes buffers,copies]
        [--runs 1] [--no-infer]

torchlint runs from the checkout this script is in (``server/`` first on ``PYTHONPATH``).
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Sequence, Tuple

SERVER = Path(__file__).resolve().parent.parent / "server"
HEAD = "import torch\nfrom torch import nn\n"
CLASS = '''

class Block{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(3, 3))

    def forward(self, x):
        return x * self.mask
'''
FIXED = re.compile(r"\((\d+) fixed")  # the summary line: "Found N findings (N fixed, 0 remaining)."


def make_file(n: int) -> str:
    return HEAD + "".join(CLASS.format(i=i) for i in range(n))


def make_copies(n: int) -> str:
    return (HEAD + "\n\nclass Layers(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + "".join("        self.l%d = nn.Linear(3, 3)\n" % i for i in range(n))
            + "\n    def forward(self, x):\n" + "".join("        x = self.l%d(x)\n" % i for i in range(n))
            + "        return x\n\n    def reset(self, w):\n"
            + "".join("        self.l%d.weight.data = w\n" % i for i in range(n)))


SHAPES = {"buffers": (make_file, []), "copies": (make_copies, ["--unsafe-fixes"])}


def torchlint(args: Sequence[str], cwd: Path, cache: Path) -> Tuple[float, str]:
    """Wall seconds of one ``torchlint check`` and what it printed."""
    env = dict(os.environ, TORCHLINT_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(SERVER), os.environ.get("PYTHONPATH")])))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "torchlint", "check", "--exit-zero", *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit("torchlint %s exited %d: %s" % (" ".join(args), done.returncode, done.stderr.decode()[-2000:]))
    return seconds, done.stdout.decode("utf-8", "replace")


def measure(shape: str, n: int, runs: int, extra: List[str]) -> List[str]:
    make, flags = SHAPES[shape]
    text = make(n)
    extra = extra + flags
    with tempfile.TemporaryDirectory(prefix="bench-fix-") as scratch:
        folder = Path(scratch)
        path = folder / "blocks.py"
        floor = check = fix = float("inf")
        fixed = "?"
        for run in range(runs):
            path.write_text(text, encoding="utf-8")
            started = time.perf_counter()
            ast.parse(path.read_text(encoding="utf-8"))
            floor = min(floor, time.perf_counter() - started)
            check = min(check, torchlint(extra + ["blocks.py"], folder, folder / ("cache-check-%d" % run))[0])
            seconds, printed = torchlint(extra + ["--fix", "blocks.py"], folder, folder / ("cache-fix-%d" % run))
            fix = min(fix, seconds)
            found = FIXED.search(printed)
            fixed = found.group(1) if found else "0"
    return [shape, str(n), str(text.count("\n")), "%.3f" % floor, "%.2f" % check, "%.2f" % fix, "%.2f" % (fix / check),
            fixed]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,2000,6000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-infer", action="store_true", help="time the syntactic layer only")
    args = parser.parse_args(argv)
    extra = ["--no-infer"] if args.no_infer else []
    print("| shape | fixes | lines | ast.parse s | check s | check --fix s | x check | fixed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes.split(","):
        for n in (int(size) for size in args.sizes.split(",")):
            print("| " + " | ".join(measure(shape, n, args.runs, extra)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
