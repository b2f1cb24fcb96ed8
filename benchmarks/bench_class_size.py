"""One class with N attributes: is every rule linear in the statements of a class?

Generates a Module whose ``__init__`` assigns N attributes and whose ``forward`` uses each once,
in two shapes: "plain" (layers and tensors, alternating) and "mixed" (layers, tensors,
Parameters, buffers, lists of layers, numbers, moved tensors; forward re-binds ``x`` on every
line, replaces Parameters, assigns ``.weight`` and ``.data``), and prints, for N = 1k, 4k, 16k,
the time of ``check_source`` (names only) next to ``ast.parse`` of the same text, best of
``--runs``. Target (issue 23): within 10x the file's ``ast.parse`` at every N; a ratio that grows
with N is a rule that scans the class once per attribute.

    .venv/bin/python benchmarks/bench_class_size.py [--sizes 1000,4000,16000] [--runs 3]
"""
from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from torchlint.engine import check_source  # noqa: E402

HEAD = ["import torch", "from torch import nn", "", "", "class Big(nn.Module):", "    def __init__(self):",
        "        super().__init__()"]
PLAIN_INIT = ["        self.w{i} = torch.zeros(4)", "        self.w{i} = nn.Linear(4, 4)"]
PLAIN_FORWARD = ["        x = x + self.w{i}", "        x = self.w{i}(x)"]
MIXED_INIT = ["        self.a{i} = nn.Linear(4, 4)", "        self.b{i} = torch.zeros(4)",
              "        self.c{i} = nn.Parameter(torch.randn(4))", "        self.register_buffer('d{i}', torch.ones(3))",
              "        self.e{i} = [nn.Linear(2, 2)]", "        self.f{i} = {i}",
              "        self.g{i} = torch.randn(3, requires_grad=True).cuda()"]
MIXED_FORWARD = ["        x = self.a{i}(x)", "        x = x + self.b{i}", "        x = x * self.c{i}", "        x = x + self.d{i}",
                 "        self.c{i} = nn.Parameter(self.c{i} * 2)", "        self.a{i}.weight = torch.randn(4, 4)",
                 "        self.b{i}.data = x", "        x = self.e{i}[0](x)"]


def make_class(n: int, init_lines, forward_lines) -> str:
    lines = list(HEAD)
    lines += [init_lines[i % len(init_lines)].format(i=i) for i in range(n)]
    lines += ["", "    def forward(self, x):"]
    # Each use names an attribute its __init__ line made (same i, same kind where the kinds line up).
    lines += [forward_lines[i % len(forward_lines)].format(i=i - i % len(init_lines) + (i % len(forward_lines))
                                                           % len(init_lines)) for i in range(n)]
    lines.append("        return x")
    return "\n".join(lines) + "\n"


def best(runs: int, work) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print("| shape | attributes | lines | ast.parse s | check_source s | x ast.parse | findings |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape, init_lines, forward_lines in (("plain", PLAIN_INIT, PLAIN_FORWARD), ("mixed", MIXED_INIT, MIXED_FORWARD)):
        for n in (int(s) for s in args.sizes.split(",")):
            text = make_class(n, init_lines, forward_lines)
            floor = best(args.runs, lambda: ast.parse(text))
            findings = []
            took = best(args.runs, lambda: findings.append(len(check_source(text, "big.py").findings)))
            print("| %s | %d | %d | %.3f | %.3f | %.1f | %d |" % (shape, n, text.count("\n"), floor, took, took / floor,
                                                                findings[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
