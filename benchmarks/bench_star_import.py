"""What a star import of a large installed library costs the default mode: tsai (``from
fastai.layers import *`` and the like in many of its files) checked with fastai installed in the
analysed environment and without it (the issue "the inference budget does not bound a star import
of a large installed library").

The script makes two virtual environments in a scratch folder outside the repository (once; later
runs reuse them), from PyPI with pip, ``--no-deps`` and every package listed (never torch: jedi
reads torchlint's own torch stubs):

- with fastai: tsai==1.0.1 and fastai, fastcore, fastprogress, fastdownload, fasttransform,
  plum-dispatch, numpy, pandas, matplotlib, scipy, scikit-learn, pyyaml, packaging, pillow, requests;
- without fastai: the same less fastai, fastcore, fasttransform, fastprogress and fastdownload, so
  that tsai's star imports from fastai name nothing jedi can read.

It copies tsai's ``.py`` files out of the first environment's site-packages into the scratch folder
(torchlint skips files inside a virtual environment) and times, each as a fresh ``torchlint check
--format json --exit-zero .`` in that folder: ``--no-infer``; the default mode with ``--python``
each environment, cold (an empty inference cache, ``TORCHLINT_CACHE_DIR``, and an empty jedi cache,
``XDG_CACHE_HOME``: parso's trees of the environment are not on disk either) then warm (the same two
folders again); and with fastai, cold, ``--infer-budget 0`` (no per-file limit). Next to them the
floor: read + ``ast.parse`` of every file in this process.

Prints CPU seconds (user + sys of torchlint and its worker processes, from ``os.wait4``), the ratio
to ``--no-infer`` and to the row without fastai of the same temperature (the issue's target: 3x or
less, cold and warm), wall seconds, the largest process, the findings and the "type inference
stopped" notes on stderr; then the findings only one environment gives.

    .venv/bin/python benchmarks/bench_star_import.py [--scratch DIR] [--runs N]
        [--env-with DIR] [--env-without DIR] [--server DIR] [--timeout SECONDS]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import (PYTHON, Outcome, corpus_files, finding_keys, parse_all, print_markdown,  # noqa: E402
                       time_in_process, torchlint_command)

ROOT = Path(__file__).resolve().parent.parent
DEPENDENCY = ["fastai", "fastcore", "fastprogress", "fastdownload", "fasttransform"]
COMMON = ["tsai==1.0.1", "plum-dispatch", "numpy", "pandas", "matplotlib", "scipy", "scikit-learn", "pyyaml",
          "packaging", "pillow", "requests"]
WITH_PACKAGES = COMMON[:1] + DEPENDENCY + COMMON[1:]
WITHOUT_PACKAGES = COMMON
BUILT = ".torchlint-bench-env"  # in an environment this script finished installing
CORPUS_MARKER = ".torchlint-bench-corpus"  # in a corpus folder this script made
STOPPED = "type inference stopped"


def default_scratch() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torchlint-bench" / "star-import"


def make_environment(folder: Path, packages: Sequence[str]) -> Path:
    """A virtual environment with ``packages`` (no dependencies pulled), made once: its interpreter."""
    python = folder / "bin" / "python"
    if (folder / BUILT).exists():
        return python
    if folder.exists():
        shutil.rmtree(folder)  # a build that did not finish
    print("making %s: pip install --no-deps %s" % (folder, " ".join(packages)), flush=True)
    venv.create(folder, with_pip=True, symlinks=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps"] + list(packages), check=True)
    (folder / BUILT).write_text(" ".join(packages) + "\n", encoding="utf-8")
    return python


def package_folder(python: Path, name: str) -> Path:
    """Where the environment's ``name`` package is (found, not imported)."""
    found = subprocess.run([str(python), "-c", "import importlib.util, sys; "
                            "print(list(importlib.util.find_spec(sys.argv[1]).submodule_search_locations)[0])",
                            name], capture_output=True, text=True, check=True).stdout.strip()
    return Path(found)


def make_corpus(folder: Path, package: Path) -> None:
    """``package``'s .py files copied to ``folder/<name>`` (made afresh each run)."""
    if folder.exists():
        if not (folder / CORPUS_MARKER).exists() and any(folder.iterdir()):
            sys.exit("%s exists and was not made by this script: not touching it" % folder)
        shutil.rmtree(folder)
    shutil.copytree(package, folder / package.name,
                    ignore=lambda where, names: [n for n in names if n == "__pycache__" or (
                        not n.endswith(".py") and not os.path.isdir(os.path.join(where, n)))])
    (folder / CORPUS_MARKER).write_text("made by benchmarks/bench_star_import.py\n", encoding="utf-8")


@dataclass
class Caches:
    """A run's cache folders: the inference cache and jedi's ($XDG_CACHE_HOME)."""
    folder: str

    def env(self) -> Dict[str, str]:
        return {"TORCHLINT_CACHE_DIR": os.path.join(self.folder, "torchlint"),
                "XDG_CACHE_HOME": os.path.join(self.folder, "xdg")}


class Temperatures:
    """Cold runs get new, empty cache folders; a warm run gets the last cold run's again."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.last: Optional[Caches] = None

    def cold(self) -> Dict[str, str]:
        self.last = Caches(tempfile.mkdtemp(prefix="caches-", dir=str(self.scratch)))
        return self.last.env()

    def warm(self) -> Dict[str, str]:
        assert self.last is not None, "a warm row follows a cold one"
        return self.last.env()


@dataclass
class Run:
    outcome: Outcome
    timed_out: bool


def run_once(cmd: Sequence[str], cwd: Path, env: Dict[str, str], timeout: float) -> Run:
    """bench_cli.run_once with a time limit: past it the command's process group is killed (the
    workers that outlive it are then not counted: the row says TIMED OUT)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=dict(os.environ, **env), start_new_session=True)
        killed = []

        def kill() -> None:
            killed.append(True)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(Outcome(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode,
                           out.read(), err.read()), bool(killed))


def best_of(runs: int, cmd: Sequence[str], cwd: Path, env: Callable[[], Dict[str, str]], timeout: float) -> Run:
    """The run of least CPU seconds (the steadier figure on a shared machine); the largest process of all."""
    done = [run_once(cmd, cwd, env(), timeout) for _ in range(runs)]
    best = min(done, key=lambda r: (r.timed_out, r.outcome.cpu))
    best.outcome.rss_mib = max(r.outcome.rss_mib for r in done)
    return best


def stopped_notes(outcome: Outcome) -> List[str]:
    return [line for line in outcome.stderr.decode("utf-8", "replace").splitlines() if STOPPED in line]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", type=Path, default=default_scratch(),
                        help="folder for the environments, the corpus and the caches, outside the repository "
                             "(default: %(default)s)")
    parser.add_argument("--runs", type=int, default=1, help="best of this many runs per row (default 1)")
    parser.add_argument("--env-with", type=Path,
                        help="an existing virtual environment with tsai and fastai to use instead of making one")
    parser.add_argument("--env-without", type=Path,
                        help="an existing virtual environment with tsai but not fastai to use instead of making one")
    parser.add_argument("--server", type=Path,
                        help="run the torchlint package in this folder (PYTHONPATH; e.g. a `git archive` export "
                             "of a commit's server/) instead of the one this interpreter imports")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a run may take (default 3600)")
    args = parser.parse_args(argv)

    scratch = args.scratch.expanduser().resolve()
    if scratch == ROOT or ROOT in scratch.parents:
        sys.exit("--scratch must be outside the repository (%s): nothing fetched is kept in it" % ROOT)
    scratch.mkdir(parents=True, exist_ok=True)
    with_python = (args.env_with / "bin" / "python" if args.env_with
                   else make_environment(scratch / "env-with-fastai", WITH_PACKAGES))
    without_python = (args.env_without / "bin" / "python" if args.env_without
                      else make_environment(scratch / "env-without-fastai", WITHOUT_PACKAGES))
    for python, wanted in ((with_python, True), (without_python, False)):
        has = subprocess.run([str(python), "-c", "import importlib.util; "
                              "print(importlib.util.find_spec('fastai') is not None)"],
                             capture_output=True, text=True, check=True).stdout.strip() == "True"
        if has != wanted:
            sys.exit("%s: fastai %s, expected %s" % (python, "installed" if has else "missing",
                                                     "installed" if wanted else "missing"))
    corpus = scratch / "corpus"
    make_corpus(corpus, package_folder(with_python, "tsai"))
    files = corpus_files(corpus)
    texts = [p.read_bytes() for p in files]

    torchlint = torchlint_command()
    base_env: Dict[str, str] = {}
    if args.server:
        server = args.server.resolve()
        torchlint = [PYTHON, "-m", "torchlint"]
        base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(server), os.environ.get("PYTHONPATH")]))
    version = subprocess.run(torchlint + ["--version"], capture_output=True, text=True,
                             env=dict(os.environ, **base_env)).stdout.strip()

    print("star-import benchmark, %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))
    print("machine: %s, %d cores, Python %s, load average %s" % (
        platform.machine(), os.cpu_count() or 0, platform.python_version(),
        " ".join("%.1f" % load for load in os.getloadavg())))
    print("torchlint: %s (%s)" % (version or "?", "PYTHONPATH=%s" % args.server if args.server else torchlint[0]))
    print("with fastai:    %s\nwithout fastai: %s" % (with_python, without_python))
    print("corpus:  %s: %d files, %d lines, %.1f MiB" % (
        corpus, len(files), sum(t.count(b"\n") for t in texts), sum(map(len, texts)) / 2 ** 20))
    print("best of %d run(s) per row\n" % args.runs, flush=True)

    floor_wall, floor_cpu = time_in_process(args.runs, lambda: parse_all(files))
    check = torchlint + ["check", "--format", "json", "--exit-zero"]
    temperatures = Temperatures(scratch)
    # (row, arguments, caches, the row without fastai it is compared with)
    rows = [
        ("--no-infer", ["--no-infer"], temperatures.cold, None),
        ("default, without fastai, cold", ["--python", str(without_python)], temperatures.cold, None),
        ("default, without fastai, warm", ["--python", str(without_python)], temperatures.warm, None),
        ("default, with fastai, cold", ["--python", str(with_python)], temperatures.cold,
         "default, without fastai, cold"),
        ("default, with fastai, warm", ["--python", str(with_python)], temperatures.warm,
         "default, without fastai, warm"),
        ("default, with fastai, cold, --infer-budget 0", ["--python", str(with_python), "--infer-budget", "0"],
         temperatures.cold, "default, without fastai, cold"),
    ]
    done: Dict[str, Run] = {}
    try:
        for row, extra, caches, _ in rows:
            print("  %-46s" % row, end="", flush=True)
            done[row] = run = best_of(args.runs, check + extra + ["."], corpus,
                                      lambda: dict(base_env, **caches()), args.timeout)
            print("%8.1f CPU s %8.1f s%s" % (run.outcome.cpu, run.outcome.seconds,
                                             "  TIMED OUT" if run.timed_out else
                                             "" if run.outcome.rc == 0 else "  (exit %d)" % run.outcome.rc),
                  flush=True)
    finally:
        for caches in scratch.glob("caches-*"):
            shutil.rmtree(caches, ignore_errors=True)

    no_infer = done["--no-infer"].outcome.cpu
    table = [["row", "CPU s", "x --no-infer", "x without fastai", "wall s", "largest MiB", "findings",
              "stopped notes"],
             ["floor (ast.parse, in-process)", "%.1f" % floor_cpu, "%.2f" % (floor_cpu / no_infer), "-",
              "%.1f" % floor_wall, "-", "-", "-"]]
    for row, _, _, against in rows:
        run, outcome = done[row], done[row].outcome
        keys = finding_keys(outcome)
        failed = "TIMED OUT" if run.timed_out else "FAILED" if outcome.rc != 0 or keys is None else ""
        table.append([row + (" (%s)" % failed if failed else ""), "%.1f" % outcome.cpu,
                      "%.2f" % (outcome.cpu / no_infer),
                      "%.2f" % (outcome.cpu / done[against].outcome.cpu) if against else "-",
                      "%.1f" % outcome.seconds, "%.0f" % outcome.rss_mib,
                      "-" if keys is None else str(sum(keys.values())), str(len(stopped_notes(outcome)))])
    print()
    print_markdown(table)

    print("\ntarget: with fastai, the default mode at most 3x the same check without it")
    for temperature in ("cold", "warm"):
        ratio = done["default, with fastai, %s" % temperature].outcome.cpu / \
            done["default, without fastai, %s" % temperature].outcome.cpu
        print("  %s: %.2fx (%s)" % (temperature, ratio, "met" if ratio <= 3 else "NOT met"))

    for row, _, _, _ in rows[1:]:
        notes = stopped_notes(done[row].outcome)
        if notes:
            print("\n%s: %d stopped note(s):" % (row, len(notes)))
            for note in notes:
                print("  " + re.sub(r"^torchlint: (note: )?", "", note))
    failures = [(row, run) for row, run in done.items() if run.timed_out or run.outcome.rc != 0
                or finding_keys(run.outcome) is None]
    for row, run in failures:
        print("\n%s: exit %d%s; stderr ends with:\n%s" % (
            row, run.outcome.rc, ", timed out" if run.timed_out else "",
            "\n".join(run.outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-5:])))

    print("\nfindings that differ between rows:")
    for first, second in (("default, without fastai, cold", "default, with fastai, cold"),
                          ("default, with fastai, cold", "default, with fastai, warm"),
                          ("default, with fastai, cold", "default, with fastai, cold, --infer-budget 0"),
                          ("default, without fastai, cold", "default, without fastai, warm")):
        a, b = finding_keys(done[first].outcome), finding_keys(done[second].outcome)
        if a is None or b is None:
            print("  %s vs %s: not compared (no JSON)" % (first, second))
            continue
        print_findings(corpus, first, a, second, b)
    return 1 if failures else 0


def print_findings(corpus: Path, first: str, a: collections.Counter, second: str, b: collections.Counter) -> None:
    """Every finding in only one of two runs (file relative to the corpus, line, column, code, severity,
    message)."""
    added, removed = b - a, a - b
    print("  %s: %d, %s: %d; %d only in the second, %d only in the first%s" % (
        first, sum(a.values()), second, sum(b.values()), sum(added.values()), sum(removed.values()),
        "" if added or removed else " (equal)"))
    for sign, diff in (("+", added), ("-", removed)):
        for key in sorted(diff, key=lambda k: (str(k[0]), k[1] or 0, k[2] or 0, str(k[3]))):
            name = key[0] or "?"
            if os.path.isabs(name) and Path(name).is_relative_to(corpus):
                name = str(Path(name).relative_to(corpus))
            print("    %s %s:%s:%s: %s [%s] %s" % (sign, name, key[1], key[2], key[3], key[4], key[5]))


if __name__ == "__main__":
    sys.exit(main())
