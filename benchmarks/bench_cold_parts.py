"""Where the default mode's cold time goes: the same CLI run with parts of the inference switched
off, side by side with the floor (``ast.parse``) and ``--no-infer`` (issue 23).

Each row but the floor is one cold ``torchlint check`` of the corpus (an empty inference cache, a
jedi cache holding only the environment's trees: bench_cli.cold_cache), in worker processes as a
user runs it. Parts are switched off by a few lines run before the CLI (BOOT), never in the product:

- ``--no-infer``: names alone.
- files only: the inference layer answers from the project's files (project_answers, base
  resolution by reading files); jedi is never asked. Its cost over ``--no-infer`` is the files'.
- jedi for class bases only: no question of the rules reaches jedi (each answers "unknown"); jedi
  still settles the class bases the files cannot. The default row's cost over this one is the
  rules' questions to jedi.
- default.
- default, unbounded: every file read for answers kept parsed, and no worker memory limit: what
  keeping the largest process under 600 MB costs (READ_FILES_KEPT, cli.process_state.WORKER_MEMORY_LIMIT).
- jedi asked only what makes torch values: the rules' questions that jedi answered with a torch
  value (a tensor, a Parameter, a buffer, a Module, a list of them...) in the default row
  (recorded there) are asked, every other one answers "unknown" at once: what a question gate
  that knew the answers in advance would cost.

Prints CPU seconds (the workers' included), the ratio to ``--no-infer``, wall seconds, the largest
process, and how many findings each row has and how many differ from the default's.

The rows run one after the other, minutes apart, and a shared machine's speed drifts in that time
(``--no-infer`` took 16.6 to 34.9 CPU s within two hours on the same code). ``--pairs N`` then runs
``--no-infer`` and the default N times more, each right after the other, and prints each pair's
ratio and their median: the ratio the target is about, with both sides measured alike.

    .venv/bin/python benchmarks/bench_cold_parts.py --corpus DIR [--runs 2] [--pairs 5]
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from bench_cli import (PYTHON, Outcome, best_of, cold_cache, corpus_files, finding_keys, parse_all, print_markdown,
                       run_once, time_in_process)

# Run as `python -c BOOT PART RECORD ARGS...`: PART picks what is switched off, ARGS go to the CLI.
# RECORD: the file where the default row writes the rules' questions jedi answers with a torch
# value (file, line, column), which the last row reads.
# The workers are forked from this process, so they run with the same parts off.
BOOT = """
import sys
from torchlint import cli
from torchlint.cli import process_state
from torchlint.inference import file_inference, project_files
part, record = sys.argv[1], sys.argv[2]
if part in ("default", "torch-answers"):
    classify = file_inference.FileInference._classify
    asked = set()
    if part == "torch-answers":
        with open(record) as lines:
            asked = {tuple(line.rstrip("\\n").split("\\t")) for line in lines}
    def recorded(self, node, question=None):
        where = (self.path, str(node.lineno), str(node.col_offset))
        if part == "torch-answers" and where not in asked:
            return None
        value = classify(self, node, question)
        if part == "default" and value is not None and value.kind.value not in ("unknown", "other"):
            with open(record, "a") as lines:  # (each worker appends its own lines)
                lines.write("\\t".join(where) + "\\n")
        return value
    file_inference.FileInference._classify = recorded
if part == "files-only":
    file_inference.FileInference._ask = lambda self, question, **options: None
elif part == "bases-only":
    file_inference.FileInference._classify = lambda self, node, question=None: None
elif part == "unbounded":
    project_files.READ_FILES_KEPT = 1 << 30
    process_state.WORKER_MEMORY_LIMIT = 1 << 62
elif part not in ("default", "torch-answers"):
    sys.exit("unknown part %r" % part)
sys.exit(cli.main(sys.argv[3:]))
"""

# (row, part, extra CLI arguments)
ROWS: List[Tuple[str, str, List[str]]] = [
    ("--no-infer", "default", ["--no-infer"]),
    ("files only (jedi never asked)", "files-only", []),
    ("jedi for class bases only", "bases-only", []),
    ("default", "default", []),
    ("default, unbounded (read files kept, no memory limit)", "unbounded", []),
    ("jedi asked only what it answers with a torch value", "torch-answers", []),
]


def check_command(part: str, record: str, extra: List[str]) -> List[str]:
    """A cold ``torchlint check`` of the corpus (the working folder) with ``part`` switched off."""
    return [PYTHON, "-c", BOOT, part, record, "check", "--no-cache", "--exit-zero", "--format", "json"] + extra + ["."]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True,
                        help="folder of .py files, sub-folders included (e.g. an unzipped wheel's transformers/models)")
    parser.add_argument("--runs", type=int, default=1, help="best of this many runs per row (default 1)")
    parser.add_argument("--pairs", type=int, default=0,
                        help="then this many runs of --no-infer and the default, each right after the other (default 0)")
    args = parser.parse_args(argv)
    corpus = args.corpus.resolve()
    files = corpus_files(corpus)
    if not files:
        sys.exit("no .py files in %s" % corpus)
    lines = sum(len(path.read_bytes().splitlines()) for path in files)
    print("corpus: %s, %d files, %d lines, best of %d run(s)" % (corpus, len(files), lines, args.runs), flush=True)

    floor_wall, floor_cpu = time_in_process(args.runs, lambda: parse_all(files))
    outcomes: Dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-parts-") as scratch:
        record = os.path.join(scratch, "torch-answers.tsv")
        open(record, "w").close()
        for row, part, extra in ROWS:
            print("  %-56s" % row, end="", flush=True)
            outcomes[row] = outcome = best_of(args.runs, check_command(part, record, extra), corpus, cold_cache)
            print("%7.1f CPU s%s" % (outcome.cpu, "" if outcome.rc == 0 else "  (exit %d)" % outcome.rc), flush=True)
        with open(record) as recorded:
            torch_answers = len(set(recorded))

    default = finding_keys(outcomes["default"]) or collections.Counter()
    no_infer_cpu = outcomes["--no-infer"].cpu
    table = [["row", "CPU s", "x --no-infer", "wall s", "largest process MiB", "findings", "differ from default"],
             ["floor (ast.parse, in-process)", "%.1f" % floor_cpu, "%.2f" % (floor_cpu / no_infer_cpu),
              "%.1f" % floor_wall, "-", "-", "-"]]
    for row, _, _ in ROWS:
        outcome = outcomes[row]
        keys = finding_keys(outcome)
        table.append([row, "%.1f" % outcome.cpu, "%.2f" % (outcome.cpu / no_infer_cpu), "%.1f" % outcome.seconds,
                      "%.0f" % outcome.rss_mib, "-" if keys is None else str(sum(keys.values())),
                      "-" if keys is None else str(sum(((keys - default) + (default - keys)).values()))])
    print()
    print_markdown(table)
    print("\njedi answered %d of the rules' questions with a torch value" % torch_answers)
    paired = run_pairs(args.pairs, corpus) if args.pairs > 0 else []
    return 0 if all(outcome.rc == 0 for outcome in list(outcomes.values()) + paired) else 1


def run_pairs(pairs: int, corpus: Path) -> List[Outcome]:
    """``--no-infer`` then the default, ``pairs`` times; each pair's CPU seconds and ratio, and the
    median ratio."""
    table = [["pair", "--no-infer CPU s", "default CPU s", "ratio", "default's largest process MiB"]]
    ratios: List[float] = []
    outcomes: List[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-pairs-") as scratch:
        record = os.path.join(scratch, "unused.tsv")
        for pair in range(1, pairs + 1):
            no_infer, default = [run_once(check_command("default", record, extra), corpus, cold_cache())
                                 for extra in (["--no-infer"], [])]
            outcomes += [no_infer, default]
            ratios.append(default.cpu / no_infer.cpu)
            table.append([str(pair), "%.1f" % no_infer.cpu, "%.1f" % default.cpu, "%.2f" % ratios[-1],
                          "%.0f" % default.rss_mib])
            print("  pair %d: %.1f against %.1f CPU s (%.2fx)" % (pair, no_infer.cpu, default.cpu, ratios[-1]),
                  flush=True)
    print()
    print_markdown(table)
    print("\nmedian ratio of %d pairs: %.2fx --no-infer" % (pairs, statistics.median(ratios)))
    return outcomes


if __name__ == "__main__":
    sys.exit(main())
