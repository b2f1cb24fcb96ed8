"""CLI throughput of torchlint next to other Python linters, on the same corpus, in one run.

    .venv/bin/python benchmarks/make_corpus.py
    .venv/bin/python benchmarks/bench_cli.py [--runs 3] [--skip-pylint] [--pylint-files N] [--skip-scaling]
        [--skip-torch-compare] [--corpus DIR]

torchlint's default mode is timed twice: cold (an empty inference cache, and a jedi cache holding
parso's trees of the environment but none of the corpus's, as on a first run on the corpus) and
warm (the caches a previous run left), then cold with torch in the analysed environment
(``--python`` this interpreter) and without (``--python`` a bare virtual environment the script
makes: torchlint reads its shipped torch stubs), whose findings must be equal. After the corpus
table a scaling table times one generated model file of 1k to 200k lines and folders of 10 to
1,000 such files.

Every row is wall-clock seconds, best of N runs. Subprocess rows also give the CPU
seconds (user + sys, all processes of the tool) and the peak RSS of the tool's largest
single process, both from os.wait4. Ratios compare seconds on the same files: to the
``ast.parse`` floor (read + parse every file, one process) and to
``torchlint check --no-infer``. Rows run on a subset (pylint with --pylint-files) are
compared with the floor and torchlint measured on that same subset, never scaled.

Tools are run from the interpreter running this script (use the project's .venv).
Nothing here is a pass/fail test: it prints figures.
"""
from __future__ import annotations

import argparse
import ast
import atexit
import collections
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DEFAULT_CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_big_model import make_model_source  # noqa: E402  (the generated model files of the scaling table)
PYTHON = sys.executable
BIN = Path(sys.executable).parent

# flake8 as it ships (pyflakes, pycodestyle, mccabe): torchlint registers a flake8
# plugin in the same environment, and the flake8 row must not run torchlint too.
FLAKE8_WITHOUT_TORCHLINT = """
import sys
from flake8.plugins import finder
_all = finder._find_importlib_plugins
finder._find_importlib_plugins = lambda: (p for p in _all() if p.package.lower() != "torchlint")
from flake8.main.cli import main
sys.argv[0] = "flake8"
sys.exit(main())
"""


@dataclass
class Row:
    tool: str
    files: int
    seconds: float
    runs: int
    group: str = "all"  # ratios compare rows of the same group (same files)
    cpu: Optional[float] = None
    rss_mib: Optional[float] = None
    rc: Optional[int] = None
    note: str = ""


@dataclass
class Outcome:
    seconds: float
    cpu: float
    rss_mib: float
    rc: int
    stdout: bytes
    stderr: bytes


def run_once(cmd: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> Outcome:
    """Run a command; its wall time, CPU time and peak RSS (largest single process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=dict(os.environ, **env) if env else None)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Outcome(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0,
                       proc.returncode, out.read(), err.read())


def best_of(runs: int, cmd: Sequence[str], cwd: Path, env: Callable[[], Optional[Dict[str, str]]] = lambda: None
            ) -> Outcome:
    """``env`` is called before each run: a cold-cache row gives every run an empty cache."""
    outcomes = [run_once(cmd, cwd, env()) for _ in range(runs)]
    best = min(outcomes, key=lambda o: o.seconds)
    best.rss_mib = max(o.rss_mib for o in outcomes)
    return best


def time_in_process(runs: int, work: Callable[[], object]) -> Tuple[float, float]:
    """Best wall-clock seconds over the runs, and the CPU seconds of that run."""
    best = (float("inf"), 0.0)
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        work()
        best = min(best, (time.perf_counter() - start, time.process_time() - start_cpu))
    return best


def parse_all(paths: Sequence[Path]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old docstrings
        for path in paths:
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def torchlint_all(paths: Sequence[Path]) -> int:
    from torchlint.engine import check_source

    return sum(len(check_source(path.read_text(encoding="utf-8"), path.name).findings) for path in paths)


def json_problem(outcome: Outcome) -> str:
    try:
        json.loads(outcome.stdout.decode("utf-8"))
    except ValueError:
        return "no JSON on stdout"
    return ""


def checked_files_line(cmd: Sequence[str], cwd: Path) -> str:
    """torchlint's own count of the files it checked (its -v summary), from one untimed run."""
    outcome = run_once(list(cmd) + ["-v"], cwd)
    found = re.search(r"checked \d+ files?[^\n]*", (outcome.stdout + outcome.stderr).decode("utf-8", "replace"))
    return found.group(0) if found else "(no 'checked N files' line from torchlint -v)"


def torchlint_command() -> List[str]:
    script = BIN / "torchlint"
    return [str(script)] if script.exists() else [PYTHON, "-m", "torchlint"]


# A file whose one question jedi answers from torch (what table() returns).
_WARM_UP_SOURCE = """import torch
from torch import nn


def table():
    return torch.ones(3)


class Warm(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = table()
"""
_ENVIRONMENT_ONLY: Dict[str, str] = {}  # the folder jedi's parse cache of the environment alone was made in


def cold_cache() -> Dict[str, str]:
    """An empty inference cache folder for one run (as on a first run), removed when the script
    ends; and a cache folder for jedi ($XDG_CACHE_HOME) that holds parso's trees of the analysed
    environment (torch, typeshed) but none of the corpus: jedi keeps the trees of every module it
    parsed in ~/.cache/jedi, so a corpus checked before would otherwise be read from there, not
    parsed (5 of 23 CPU seconds on 900 of transformers' model files). The environment's trees are
    the warm start a machine that ran torchlint before has."""
    if "folder" not in _ENVIRONMENT_ONLY:
        template = tempfile.mkdtemp(prefix="torchlint-bench-jedi-")
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        source = Path(template) / "warm_up.py"
        source.write_text(_WARM_UP_SOURCE, encoding="utf-8")
        run_once(torchlint_command() + ["check", "--no-cache", "--exit-zero", str(source)], Path(template),
                 {"XDG_CACHE_HOME": str(Path(template) / "cache")})
        _ENVIRONMENT_ONLY["folder"] = str(Path(template) / "cache")
    folder = tempfile.mkdtemp(prefix="torchlint-bench-cold-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    shutil.copytree(_ENVIRONMENT_ONLY["folder"], os.path.join(folder, "xdg"))
    return {"TORCHLINT_CACHE_DIR": os.path.join(folder, "torchlint"), "XDG_CACHE_HOME": os.path.join(folder, "xdg")}


def torchfix_command() -> List[str]:
    script = BIN / "torchfix"
    return [str(script)] if script.exists() else [PYTHON, "-m", "torchfix"]


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def evenly_spaced(items: Sequence[Path], count: int) -> List[Path]:
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def tail(data: bytes, lines: int = 5) -> str:
    return "\n".join(data.decode("utf-8", "replace").strip().splitlines()[-lines:])


class Bench:
    def __init__(self, corpus: Path, runs: int):
        self.corpus = corpus
        self.runs = runs
        self.rows: List[Row] = []
        self.notes: List[str] = []

    def subprocess_row(self, tool: str, cmd: Sequence[str], files: int, ok_codes=(0, 1), runs=None,
                       group="all", validate: Callable[[Outcome], str] = lambda outcome: "",
                       env: Callable[[], Optional[Dict[str, str]]] = lambda: None) -> Outcome:
        """``validate`` says what is wrong with an outcome ("" when it looks like a real run)."""
        runs = runs or self.runs
        print("  %-40s" % tool, end="", flush=True)
        outcome = best_of(runs, cmd, self.corpus, env)
        print("%8.2f s" % outcome.seconds, flush=True)
        note = validate(outcome)
        if outcome.rc not in ok_codes:
            note = "unexpected exit code"
        if note:
            note = "FAILED: " + note
            self.notes.append("%s: %s, exit code %d; stderr ends with:\n%s" % (
                tool, note, outcome.rc, tail(outcome.stderr)))
        self.rows.append(Row(tool, files, outcome.seconds, runs, group, outcome.cpu, outcome.rss_mib,
                             outcome.rc, note))
        return outcome

    def in_process_row(self, tool: str, work: Callable[[], object], files: int, group="all") -> None:
        print("  %-40s" % tool, end="", flush=True)
        seconds, cpu = time_in_process(self.runs, work)
        print("%8.2f s" % seconds, flush=True)
        self.rows.append(Row(tool, files, seconds, self.runs, group, cpu, note="in-process"))


def corpus_files(corpus: Path) -> List[Path]:
    """The corpus's .py files, in sub-folders too (a package's sources: transformers' models/), as
    torchlint walks them (hidden folders and __pycache__ left out)."""
    return sorted(p for p in corpus.rglob("*.py") if p.is_file() and not any(
        part.startswith(".") or part == "__pycache__" for part in p.relative_to(corpus).parts[:-1]))


# What `torchlint check -v` says it reads torch's API from (the jedi layer's describe()).
FROM_ENVIRONMENT = "torch's API from the environment's torch"
FROM_STUBS = "torch's API from torchlint's stubs"


def reads_torch_from(source: str) -> Callable[[Outcome], str]:
    """A validation: the run printed JSON and read torch's API from ``source``."""
    def problem(outcome: Outcome) -> str:
        if source not in outcome.stderr.decode("utf-8", "replace"):
            return "torchlint -v did not say %r" % source
        return json_problem(outcome)
    return problem


def bare_virtualenv(folder: Path) -> Path:
    """A virtual environment with no packages (no pip either): its interpreter."""
    venv.create(folder, with_pip=False, symlinks=os.name != "nt")
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def compare_torch_environments(bench: "Bench", torchlint: List[str], count: int
                               ) -> Optional[Tuple[Outcome, Outcome]]:
    """The default mode, cold, with torch in the analysed environment (this interpreter's) and
    without it (a bare virtual environment made here, so that jedi reads the torch stubs shipped
    with torchlint). Both with --show-all --show-hints, so that quiet findings and hints are
    compared too; the findings must be equal. Both with no per-file inference budget: the budget
    is wall-clock time, so on a loaded machine which files it cuts short changes from run to run,
    and the comparison would measure the load."""
    if importlib.util.find_spec("torch") is None:
        bench.notes.append("no torch in %s: the rows with and without torch are left out" % PYTHON)
        return None
    command = torchlint + ["check", "--format", "json", "--show-all", "--show-hints", "--infer-budget", "0", "-v"]
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-notorch-") as scratch:
        bare = bare_virtualenv(Path(scratch) / "venv")
        with_torch = bench.subprocess_row(WITH_TORCH, command + ["--python", PYTHON, "."], count,
                                          validate=reads_torch_from(FROM_ENVIRONMENT), env=cold_cache)
        without = bench.subprocess_row(WITHOUT_TORCH, command + ["--python", str(bare), "."], count,
                                       validate=reads_torch_from(FROM_STUBS), env=cold_cache)
    return with_torch, without


def finding_keys(outcome: Outcome) -> Optional[collections.Counter]:
    """A run's findings as (file, line, column, code, severity, message), or None without JSON."""
    try:
        findings = json.loads(outcome.stdout.decode("utf-8"))
    except ValueError:
        return None
    return collections.Counter((f.get("filename"), (f.get("location") or {}).get("row"),
                                (f.get("location") or {}).get("column"), f.get("code"), f.get("severity"),
                                f.get("message")) for f in findings)


def print_difference(first: str, a: collections.Counter, second: str, b: collections.Counter,
                     shown: int = 10) -> None:
    """How two runs' findings differ: counts, then the first few only in one of them."""
    added, removed = b - a, a - b
    print("  %s vs %s: %d and %d findings, %d only in the second, %d only in the first%s" % (
        first, second, sum(a.values()), sum(b.values()), sum(added.values()), sum(removed.values()),
        "" if added or removed else " (equal)"))
    for sign, diff in (("+", added), ("-", removed)):
        for key in sorted(diff, key=str)[:shown]:
            print("    %s %s:%s:%s: %s %s" % (sign, Path(key[0] or "?").name, key[1], key[3], key[4], key[5]))


def print_findings_difference(outcomes: Sequence[Tuple[str, Outcome]], shown: int = 10) -> None:
    """How the findings of each mode differ from the first's (--no-infer): what the inference
    layer adds or takes away, and whether the cold and warm runs agree."""
    keys = [(label, finding_keys(outcome)) for label, outcome in outcomes]
    if any(k is None for _, k in keys):
        print("\nfindings between modes: not compared (a run printed no JSON)")
        return
    print("\nfindings between modes:")
    for (first, a), (second, b) in [(keys[0], other) for other in keys[1:]] + (
            [(keys[1], keys[2])] if len(keys) > 2 else []):
        print_difference(first, a, second, b, shown)


def print_torch_difference(with_torch: Outcome, without: Outcome, shown: int = 10) -> None:
    a, b = finding_keys(with_torch), finding_keys(without)
    if a is None or b is None:
        print("\nfindings with and without torch: not compared (a run printed no JSON)")
        return
    print("\nfindings with and without torch in the analysed environment (default mode, --show-all "
          "--show-hints, --infer-budget 0): %s" % ("equal" if a == b else "DIFFERENT"))
    print_difference("torch", a, "no torch (stubs)", b, shown)


def exit_column(row: Row) -> str:
    if row.rc is None:
        return "-"
    return "%d (%s)" % (row.rc, row.note) if row.note else str(row.rc)


def print_markdown(lines: List[List[str]]) -> None:
    """A Markdown table: the first line is the header; numbers right-aligned."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for index, line in enumerate(lines):
        cells = [cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in
                 enumerate(zip(line, widths))]
        print("| " + " | ".join(cells) + " |")
        if index == 0:
            print("|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|")


def print_table(rows: List[Row], floor_tool: Dict[str, str], torchlint_tool: Dict[str, str]) -> None:
    by_tool = {(r.group, r.tool): r for r in rows}
    header = ["tool", "files", "runs", "seconds", "files/s", "x floor", "x torchlint --no-infer",
              "CPU s", "peak RSS MiB", "exit"]
    lines = [header]
    for row in rows:
        floor = by_tool.get((row.group, floor_tool[row.group]))
        reference = by_tool.get((row.group, torchlint_tool[row.group]))
        lines.append([
            row.tool,
            str(row.files),
            str(row.runs),
            "%.2f" % row.seconds,
            "%.0f" % (row.files / row.seconds) if row.seconds else "-",
            "%.2f" % (row.seconds / floor.seconds) if floor else "-",
            "%.2f" % (row.seconds / reference.seconds) if reference else "-",
            "%.2f" % row.cpu if row.cpu is not None else "-",
            "%.0f" % row.rss_mib if row.rss_mib is not None else "-",
            exit_column(row),
        ])
    print_markdown(lines)


def summarize_findings(outcome: Outcome, list_findings: bool) -> Optional[int]:
    try:
        findings = json.loads(outcome.stdout.decode("utf-8"))
    except ValueError:
        print("torchlint --format json did not print JSON; stdout starts with: %r" % outcome.stdout[:300])
        return None
    counts = collections.Counter(f.get("code") or "?" for f in findings)
    print("\ntorchlint --no-infer findings on the corpus: %d in %d files" % (
        len(findings), len({f.get("filename") for f in findings})))
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], str(item[0]))):
        print("  %-8s %5d" % (code, count))
    if list_findings:
        print()
        for f in sorted(findings, key=lambda f: (f.get("filename") or "", (f.get("location") or {}).get("row", 0))):
            print("%s:%s:%s: %s" % (Path(f.get("filename") or "?").name, (f.get("location") or {}).get("row"),
                                    f.get("code"), f.get("message")))
    return len(findings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="folder of .py files, sub-folders included (default: benchmarks/corpus, see make_corpus.py; "
                             "a large real one: an unzipped wheel's package, e.g. transformers/models)")
    parser.add_argument("--runs", type=int, default=3, help="best of this many runs per row (default 3)")
    parser.add_argument("--skip-pylint", action="store_true", help="leave pylint out (it is slow)")
    parser.add_argument("--pylint-files", type=int, default=0,
                        help="run pylint on this many files only (evenly spaced through the corpus)")
    parser.add_argument("--pylint-runs", type=int, default=1,
                        help="best of this many pylint runs (default 1: it takes minutes)")
    parser.add_argument("--pylint-defaults", action="store_true",
                        help="pylint with its default checks (default: --disable=all --enable=E,W)")
    parser.add_argument("--skip-flake8", action="store_true")
    parser.add_argument("--flake8-plugin", action="store_true",
                        help="add a row for flake8 with torchlint's flake8 plugin (TL codes) loaded")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--skip-ruff", action="store_true")
    parser.add_argument("--other-runs", type=int, default=1,
                        help="best of this many runs for flake8 and TorchFix (default 1: they take minutes)")
    parser.add_argument("--skip-torch-compare", action="store_true",
                        help="leave out the default mode with and without torch in the analysed environment")
    parser.add_argument("--list-findings", action="store_true",
                        help="print every torchlint finding (file:line:code: message)")
    parser.add_argument("--skip-scaling", action="store_true", help="leave out the scaling table")
    parser.add_argument("--scaling-lines", default="1000,10000,60000,200000",
                        help="sizes of the one-file rows of the scaling table (lines, comma-separated)")
    parser.add_argument("--scaling-files", default="10,100,1000",
                        help="folder sizes of the scaling table (files of about 300 lines each)")
    parser.add_argument("--scaling-runs", type=int, default=1, help="best of this many runs per scaling cell")
    args = parser.parse_args(argv)

    corpus = args.corpus.resolve()
    files = corpus_files(corpus)
    if not files:
        sys.exit("no .py files in %s: run benchmarks/make_corpus.py first" % corpus)
    texts = [p.read_bytes() for p in files]
    print("torchlint CLI benchmark, %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))
    print("machine: %s, %d cores, Python %s" % (platform.machine(), os.cpu_count() or 0, platform.python_version()))
    print("corpus:  %s: %d files, %d lines, %.1f MiB" % (
        corpus, len(files), sum(t.count(b"\n") for t in texts), sum(map(len, texts)) / 2 ** 20))
    print("tools:   torchlint %s, ruff %s, flake8 %s, pylint %s, TorchFix %s" % (
        version("torchlint"), version("ruff"), version("flake8"), version("pylint"), version("TorchFix")))
    print("best of %d runs per row (pylint: %d)\n" % (args.runs, args.pylint_runs))

    bench = Bench(corpus, args.runs)
    count = len(files)
    torchlint = torchlint_command()

    bench.in_process_row("ast.parse floor (read + parse)", lambda: parse_all(files), count)
    in_process_findings = []
    bench.in_process_row("torchlint in-process (check_source)",
                         lambda: in_process_findings.append(torchlint_all(files)), count)
    no_infer = bench.subprocess_row("torchlint check --no-infer",
                                    torchlint + ["check", "--no-infer", "--format", "json", "."], count,
                                    validate=json_problem)
    default = torchlint + ["check", "--format", "json", "."]
    cold = bench.subprocess_row(COLD, default, count, validate=json_problem, env=cold_cache)
    warm_env = cold_cache()
    run_once(default, corpus, warm_env)  # fills the cache, untimed
    warm = bench.subprocess_row(WARM, default, count, validate=json_problem, env=lambda: warm_env)
    torch_outcomes = None if args.skip_torch_compare else compare_torch_environments(bench, torchlint, count)

    ruff = BIN / "ruff"
    if not args.skip_ruff and ruff.exists():
        bench.subprocess_row("ruff check --no-cache", [str(ruff), "check", "--no-cache", "--isolated", "."], count)
    if not args.skip_flake8:
        bench.subprocess_row("flake8 --jobs=auto", [PYTHON, "-c", FLAKE8_WITHOUT_TORCHLINT, "--jobs=auto", "."],
                             count, runs=args.other_runs)
        if args.flake8_plugin:
            bench.subprocess_row("flake8 --jobs=auto + torchlint plugin",
                                 [PYTHON, "-m", "flake8", "--jobs=auto", "."], count)

    if not args.skip_torchfix:
        bench.subprocess_row("torchfix", torchfix_command() + ["."], count, runs=args.other_runs)

    floor_tool = {"all": "ast.parse floor (read + parse)"}
    torchlint_tool = {"all": "torchlint check --no-infer"}
    if not args.skip_pylint:
        checks = [] if args.pylint_defaults else ["--disable=all", "--enable=E,W"]
        label = "pylint --jobs=0" + (" (default checks)" if args.pylint_defaults else " -d all -e E,W")
        pylint = [PYTHON, "-m", "pylint", "--jobs=0", "--score=n", "--reports=n"] + checks
        # pylint exit codes are a bit mask of message kinds; 32 is a usage error.
        pylint_ok = tuple(code for code in range(32) if not code & 1)  # 1: fatal message
        if args.pylint_files and args.pylint_files < count:
            subset = evenly_spaced(files, args.pylint_files)
            names = [p.name for p in subset]
            group = "subset of %d" % len(subset)
            floor_tool[group] = "ast.parse floor, pylint subset"
            torchlint_tool[group] = "torchlint --no-infer, pylint subset"
            bench.in_process_row(floor_tool[group], lambda: parse_all(subset), len(subset), group)
            bench.subprocess_row(torchlint_tool[group], torchlint + ["check", "--no-infer", "--format", "json"]
                                 + names, len(subset), group=group, validate=json_problem)
            bench.subprocess_row(label + ", subset", pylint + names, len(subset), ok_codes=pylint_ok,
                                 runs=args.pylint_runs, group=group)
        else:
            bench.subprocess_row(label, pylint + ["--recursive=y", "."], count, ok_codes=pylint_ok,
                                 runs=args.pylint_runs)

    checked = checked_files_line(torchlint + ["check", "--no-infer", "."], corpus)
    print("\ntorchlint check --no-infer -v says: " + checked)
    print()
    print_table(bench.rows, floor_tool, torchlint_tool)
    floor = bench.rows[0].seconds
    tl_row = next(r for r in bench.rows if r.tool == "torchlint check --no-infer")
    if tl_row.note:
        print("\nSPEC target (torchlint --no-infer within 3x of the ast.parse floor): not measured, the run failed")
    else:
        print("\nSPEC target: torchlint --no-infer within 3x of the ast.parse floor: %.2fx (%s)" % (
            tl_row.seconds / floor, "met" if tl_row.seconds <= 3 * floor else "NOT met"))
    print("in CPU seconds (steadier than wall clock on a busy machine), torchlint --no-infer is %.2fx the floor" % (
        tl_row.cpu / bench.rows[0].cpu))
    print("in-process torchlint alone is %.2fx the floor; the rest of the CLI row is process start-up, "
          "file walking, worker processes and output" % (bench.rows[1].seconds / floor))
    by_tool = {row.tool: row for row in bench.rows}
    if not tl_row.note and not by_tool[COLD].note and not by_tool[WARM].note:
        for label, row, bound in (("default mode, cold cache", by_tool[COLD], 3.0),
                                  ("default mode, warm cache", by_tool[WARM], 1.5)):
            ratio = row.seconds / tl_row.seconds
            verdict = "met" if ratio <= bound else "NOT met"
            print("target: %s within %gx of --no-infer: %.2fx (%s)" % (label, bound, ratio, verdict))
    for note in bench.notes:
        print("\nnote: " + note)

    print_findings_difference([("--no-infer", no_infer), ("cold", cold), ("warm", warm)])
    if torch_outcomes is not None:
        print_torch_difference(*torch_outcomes)
    cli_findings = summarize_findings(no_infer, args.list_findings)
    if cli_findings is not None and in_process_findings and cli_findings != in_process_findings[-1]:
        print("\nwarning: the CLI reported %d findings, check_source %d on the same files "
              "(configuration, exclusions or a difference between the two paths)" % (
                  cli_findings, in_process_findings[-1]))
    if not args.skip_scaling:
        scaling([int(n) for n in args.scaling_lines.split(",") if n],
                [int(n) for n in args.scaling_files.split(",") if n], args.scaling_runs, torchlint)
    return 0


COLD = "torchlint check (default, cold cache)"
WARM = "torchlint check (default, warm cache)"
WITH_TORCH = "default, cold, no budget, torch in the env"
WITHOUT_TORCH = "default, cold, no budget, no torch"
FILE_LINES = 300  # lines of each file in the many-files rows


def scaling(sizes: Sequence[int], folders: Sequence[int], runs: int, torchlint: List[str]) -> None:
    """One generated model file growing from 1k to 200k lines, then folders of 10 to 1,000 files:
    the floor (read + ast.parse in one process), --no-infer and the default mode (cold cache, the
    per-file budget at its default) as a user runs them, and the cost per line."""
    print("\nscaling (generated model files, benchmarks/make_big_model.py; best of %d)\n" % runs)
    header = ["input", "lines", "floor s", "--no-infer s", "x floor", "us/line --no-infer", "default cold s",
              "x --no-infer", "exit"]
    lines = [header]
    with tempfile.TemporaryDirectory(prefix="torchlint-scaling-") as scratch:
        cases = []
        for size in sizes:
            folder = Path(scratch) / ("one_%d" % size)
            folder.mkdir()
            (folder / "model.py").write_text(make_model_source(size), encoding="utf-8")
            cases.append(("1 file", folder))
        for count in folders:
            folder = Path(scratch) / ("files_%d" % count)
            folder.mkdir()
            text = make_model_source(FILE_LINES)
            for number in range(count):
                (folder / ("model_%04d.py" % number)).write_text(text, encoding="utf-8")
            cases.append(("%d files" % count, folder))
        for label, folder in cases:
            paths = sorted(folder.glob("*.py"))
            total = sum(p.read_text(encoding="utf-8").count("\n") for p in paths)
            print("  %-10s %8d lines" % (label, total), end="", flush=True)
            floor, _ = time_in_process(runs, lambda: parse_all(paths))
            names = best_of(runs, torchlint + ["check", "--no-infer", "--format", "json", "."], folder)
            default = best_of(runs, torchlint + ["check", "--format", "json", "."], folder, cold_cache)
            print("  floor %.2f s, --no-infer %.2f s, default %.2f s" % (floor, names.seconds, default.seconds),
                  flush=True)
            lines.append([label, "{:,}".format(total), "%.2f" % floor, "%.2f" % names.seconds,
                          "%.2f" % (names.seconds / floor), "%.1f" % (names.seconds / total * 1e6),
                          "%.2f" % default.seconds, "%.2f" % (default.seconds / names.seconds),
                          "%d / %d" % (names.rc, default.rc)])
    print()
    print_markdown(lines)


if __name__ == "__main__":
    sys.exit(main())
