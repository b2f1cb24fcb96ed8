"""Signal on real code: what a default `torchlint check` reports on real PyTorch code bases.

For each corpus (a folder of code; the installed torch's nn, optim, distributions and ao folders
count as one corpus, "torch"), runs `torchlint check --format json` in the default mode (jedi
layer on; the JSON carries every finding, hints included) and prints: files, lines, findings per
severity (error / warning / information / hint) and per rule, then every finding that is not a
hint (`path:line code [severity] message`), for a person to read and judge.

With `--fixes`, each corpus is also copied twice into a temporary folder, one copy fixed with
`torchlint check --fix` and one with `--fix --unsafe-fixes`, and every file a fix changed is run
before and after through the repository's fix-correctness harness (tests/fix_runner.py, judged
by tests/test_fixes_runtime.py's `differences`: import, each Module class built with no
arguments, one forward where an input can be sized, the `__main__` block): the fixes that change
shapes, dtypes or devices or raise something new are printed.

    .venv/bin/python benchmarks/real_code_signal.py                       # the installed torch only
    .venv/bin/python benchmarks/real_code_signal.py /tmp/corpora/detr /tmp/corpora/timm --fixes
    .venv/bin/python benchmarks/real_code_signal.py --no-torch /tmp/corpora/*
    .venv/bin/python benchmarks/real_code_signal.py --no-torch --manifest benchmarks/real_code_corpora.json \
        --corpora /tmp/bench-signal/corpora --prepare

With `--manifest`, the corpora a JSON file names (where each came from, at which version: a PyPI
release or a GitHub commit) are checked too, each from `--corpora`/NAME; `--prepare` first
downloads the PyPI ones that are missing there (`pip download --no-deps`, the package folder of
the wheel or sdist) and makes the virtual environment of a corpus that names one (a framework it
builds on, `pip install --no-deps`), whose interpreter torchlint then reads as `--python`.
GitHub corpora cannot be fetched from here: the script says which commit to put where.

Per corpus it also prints the CPU seconds of torchlint and its workers against the floor of
reading and `ast.parse`-ing the same files once in this process, and torchlint's notes (classes
not checked because a base could not be read). `--cold` gives each corpus a new, empty cache.

Fetched sources are corpora for this benchmark only: keep them outside the repository.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import tarfile
import time
import zipfile
from pathlib import Path

# Not named benchmarks/signal.py: a script's folder comes first on the import path, so every
# script in benchmarks/ would import that file instead of the standard library's `signal`.
ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SEVERITIES = ("error", "warning", "info", "hint")
TORCH_FOLDERS = ("nn", "optim", "distributions", "ao")


def torch_corpus():
    """The installed torch's folders (located, never imported), or None when torch is absent."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(list(spec.submodule_search_locations)[0])
    return [base / name for name in TORCH_FOLDERS if (base / name).is_dir()]


def corpus_files(paths):
    """The files `torchlint check` walks under the paths (its own discovery: same excludes)."""
    from torchlint.files import discover
    files = []
    for path in paths:
        files += discover([path], path if path.is_dir() else path.parent).files
    return sorted(set(files))


COLD_CACHE = []  # with --cold: the fresh cache folder of the corpus being checked


def torchlint(args, cwd=None, timeout=3600):
    """Runs the CLI of this checkout with the interpreter running this script."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "server"), os.environ.get("PYTHONPATH", "")]))
    if COLD_CACHE:
        env.update(TORCHLINT_CACHE_DIR=str(COLD_CACHE[-1] / "torchlint"), XDG_CACHE_HOME=str(COLD_CACHE[-1]))
    return subprocess.run([sys.executable, "-m", "torchlint", "check", "--exit-zero"] + args, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env)


def children_cpu():
    """CPU seconds (user + system) of the finished child processes and the ones they waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def findings_of(paths, extra):
    """(findings, wall seconds, CPU seconds of torchlint and its workers, torchlint's notes)."""
    started, cpu = time.perf_counter(), children_cpu()
    done = torchlint(["--format", "json"] + extra + [str(p) for p in paths])
    if done.returncode != 0:
        raise SystemExit("torchlint failed (exit %d): %s" % (done.returncode, done.stderr[-2000:]))
    notes = [line for line in done.stderr.splitlines() if line.startswith("torchlint: note")]
    return json.loads(done.stdout), time.perf_counter() - started, children_cpu() - cpu, notes


def parse_floor(files):
    """CPU seconds to read and `ast.parse` each file once: what no checker of the text can beat."""
    started = time.process_time()
    for path in files:
        try:
            ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            pass
    return time.process_time() - started


def load_manifest(path):
    entries = json.loads(path.read_text(encoding="utf-8"))["corpora"]
    for entry in entries:
        if ("pypi" in entry) == ("github" in entry):
            raise SystemExit("%s: corpus %r names neither or both of pypi and github" % (path, entry.get("name")))
    return entries


def unpack_package(archive, package, target):
    """The folder `package` of a wheel or sdist (at its root or one folder down), copied to `target`."""
    with tempfile.TemporaryDirectory(prefix="torchlint-signal-unpack-") as tmp:
        if archive.name.endswith(".whl") or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(tmp)
        else:
            with tarfile.open(archive) as opened:
                opened.extractall(tmp, filter="data")
        found = [p for p in [Path(tmp) / package] + sorted(Path(tmp).glob("*/" + package)) if p.is_dir()]
        if not found:
            raise SystemExit("%s has no folder %s" % (archive.name, package))
        shutil.copytree(found[0], target)


def environment_python(corpora, entry):
    folder = corpora / ("env-" + entry["name"])
    return folder / "bin" / "python"


def prepare(entries, corpora):
    """Downloads the PyPI corpora missing under `corpora`, makes the environments that are missing."""
    corpora.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        target = corpora / entry["name"]
        if "pypi" in entry and not target.exists():
            with tempfile.TemporaryDirectory(prefix="torchlint-signal-download-") as tmp:
                # --no-build-isolation: an sdist's metadata is read with this environment's packages; pip
                # would otherwise install its build requirements (an unpinned torch) to read it.
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "-q",
                                "-d", tmp, entry["pypi"]], check=True)
                unpack_package(next(Path(tmp).iterdir()), entry["package"], target)
        python = environment_python(corpora, entry)
        if entry.get("environment") and not python.exists():
            subprocess.run([sys.executable, "-m", "venv", "--symlinks", str(python.parent.parent)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps"] + entry["environment"], check=True)
            if entry.get("torch_from_this_environment"):
                # The torch this script runs with, seen by the environment (a .pth line after its own
                # packages): jedi reads torch.utils.data and torch.distributions there, nothing installed.
                spec = importlib.util.find_spec("torch")
                if spec is None or not spec.submodule_search_locations:
                    raise SystemExit("%s wants this environment's torch: torch is not installed here" % entry["name"])
                site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                      check=True, capture_output=True, text=True).stdout.strip()
                torch_site = Path(list(spec.submodule_search_locations)[0]).parent
                (Path(site) / "zz-torch-of-the-benchmark.pth").write_text(str(torch_site) + "\n", encoding="utf-8")


def manifest_corpora(entries, corpora):
    """(name, [folder], extra torchlint arguments) per manifest entry; exits on one that is missing."""
    found, missing = [], []
    # The folder holding the corpora is their project root (as a user's repository is): without
    # one, the root is the package folder itself and the package's own absolute imports name
    # nothing on the analysed path.
    marker = corpora / "pyproject.toml"
    if corpora.is_dir() and not marker.exists():
        marker.write_text('[project]\nname = "real-code-signal-corpora"\nversion = "0"\n', encoding="utf-8")
    for entry in entries:
        folder = corpora / entry["name"]
        if not folder.is_dir():
            missing.append("%s: %s" % (folder, "pip download --no-deps %s (or --prepare)" % entry["pypi"]
                                       if "pypi" in entry else "the .py files of github:%s at %s" % (
                                           entry["github"], entry["commit"])))
            continue
        extra = []
        if entry.get("environment"):
            python = environment_python(corpora, entry)
            if not python.exists():
                missing.append("%s: a virtual environment with %s (or --prepare)" % (
                    python.parent.parent, " ".join(entry["environment"])))
                continue
            extra = ["--python", str(python)]
        version = entry.get("pypi") or "%s@%s" % (entry["github"], entry["commit"][:7])
        found.append(("%s (%s; %s)" % (entry["name"], version, entry.get("field", "")), [folder.resolve()], extra))
    if missing:
        raise SystemExit("missing corpora:\n  " + "\n  ".join(missing))
    return found


def display(filename, paths):
    for path in paths:
        base = path if path.is_dir() else path.parent
        try:
            return "%s/%s" % (base.name, Path(filename).relative_to(base))
        except ValueError:
            continue
    return filename


def uncoded(finding):
    """What a finding without a rule code is: a file that does not parse, or a note about the check
    itself (type inference stopped by the per-file budget: the rest checked by names alone)."""
    return "syntax-error" if finding["message"].startswith("SyntaxError") else "note"


def report(name, paths, findings, seconds, cpu, floor, files, lines):
    severity = collections.Counter(f["severity"] for f in findings)
    per_rule = collections.defaultdict(collections.Counter)
    for f in findings:
        per_rule[f["code"] or uncoded(f)][f["severity"]] += 1
    print("\n## %s\n" % name)
    print("%d files, %d lines, %.1f s (%.1f CPU s; ast.parse floor %.2f CPU s, x%.0f); findings: %s" % (
        files, lines, seconds, cpu, floor, cpu / floor if floor else 0,
        ", ".join("%s %d" % (s, severity[s]) for s in SEVERITIES)))
    if per_rule:
        print("\n| rule | " + " | ".join(SEVERITIES) + " |\n|---|" + "---|" * len(SEVERITIES))
        for code in sorted(per_rule):
            print("| %s | %s |" % (code, " | ".join(str(per_rule[code][s]) for s in SEVERITIES)))
    shown = [f for f in findings if f["severity"] != "hint"]
    print("\nnon-hint findings (%d):" % len(shown))
    for f in shown:
        print("  %s:%d %s [%s] %s" % (display(f["filename"], paths), f["location"]["row"], f["code"] or uncoded(f),
                                      f["severity"], f["message"]))
    return severity


def copy_corpus(paths, into):
    """Copies of the corpus's folders under `into`, and a map copy file -> original file."""
    copies = []
    for i, path in enumerate(paths):
        target = into / ("%d_%s" % (i, path.name))
        if path.is_dir():
            shutil.copytree(path, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        else:
            target.mkdir()
            target = target / path.name
            shutil.copy2(path, target)
        copies.append(target)
    return copies


def package_of(path):
    """(the folder to put on the import path, the dotted package) of a file: the package its
    `__init__.py` chain makes it part of (for its relative imports), else its own folder."""
    folder, parts = path.parent, []
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts) or None


def check_fixes(name, paths, extra, runner_timeout, harness_path):
    """Fixes every file of the corpus as --fix and --fix --unsafe-fixes do, runs what changed."""
    sys.path.insert(0, str(TESTS))
    from test_fixes_runtime import RUNNER, differences  # the harness the fixture tests use
    originals = {}
    with tempfile.TemporaryDirectory(prefix="torchlint-signal-") as tmp:
        tmp = Path(tmp)
        texts = collections.defaultdict(dict)
        for kind, flags in (("fix", ["--fix"]), ("unsafe-fix", ["--fix", "--unsafe-fixes"])):
            (tmp / kind).mkdir()
            copies = copy_corpus(paths, tmp / kind)
            done = torchlint(["-q"] + flags + extra + [str(c) for c in copies])
            if done.returncode not in (0, 1):
                print("  %s: torchlint exited %d: %s" % (kind, done.returncode, done.stderr[-1000:]))
            for copy, path in zip(copies, paths):
                for fixed in corpus_files([copy]):
                    original = path / fixed.relative_to(copy) if path.is_dir() else path
                    before = originals.setdefault(original, original.read_text(encoding="utf-8", errors="replace"))
                    after = fixed.read_text(encoding="utf-8", errors="replace")
                    if after != before:
                        texts[original][kind] = after
        jobs, names = [], {}
        for original in sorted(texts):
            job_name = "f%03d_%s" % (len(jobs), original.stem)
            names[job_name] = original
            fixed = texts[original]
            root, package = package_of(original)
            jobs.append({"name": job_name, "inputs": {}, "package": package, "root": str(root), "texts": {
                "original": originals[original], "fix": fixed.get("fix", originals[original]),
                "unsafe-fix": fixed.get("unsafe-fix", originals[original])}})
        print("\nfixes: %d files changed by --fix, %d by --fix --unsafe-fixes" % (
            sum("fix" in t for t in texts.values()), sum("unsafe-fix" in t for t in texts.values())))
        if not jobs:
            return 0
        for job in jobs:  # a fix that does not parse fails before anything runs
            for kind in ("fix", "unsafe-fix"):
                try:
                    compile(job["texts"][kind], job["name"], "exec")
                except SyntaxError as err:
                    print("  FAILED %s after %s: does not parse: %s" % (display(str(names[job["name"]]), paths),
                                                                        kind, err))
        # The corpus's own folders on the import path (sibling imports of the original files), no
        # GPU: the same runs on every machine, as in the tests.
        search = [str(ROOT / "server")] + [str(p) for p in harness_path]
        search += sorted({job["root"] for job in jobs} | {str(p if p.is_dir() else p.parent) for p in paths})
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join(search + [os.environ.get("PYTHONPATH", "")]))
        (tmp / "run").mkdir()
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(jobs), capture_output=True,
                                  text=True, timeout=runner_timeout, cwd=str(tmp / "run"), env=env)
        except subprocess.TimeoutExpired:
            print("  the harness ran past %d s; nothing compared" % runner_timeout)
            return 1
        if done.returncode != 0:
            print("  the harness failed (exit %d): %s" % (done.returncode, done.stderr[-2000:]))
            return 1
        results = json.loads(done.stdout)["results"]
    failed = 0
    for job in jobs:
        stages = results[job["name"]]
        before = stages["original"]
        if "timeout" in before:
            print("  not compared: %s (the original ran past the runner's time limit)" % display(
                str(names[job["name"]]), paths))
            continue
        for kind in ("fix", "unsafe-fix"):
            if job["texts"][kind] == job["texts"]["original"]:
                continue
            problems = differences(before, stages[kind])
            if problems:
                failed += 1
                where = display(str(names[job["name"]]), paths)
                print("  FAILED %s after %s: %s" % (where, kind, "; ".join(problems)))
    originals = [results[j["name"]]["original"] for j in jobs]
    print("harness: %d files run in %.0f s: %d imported as the original, %d Module classes built, %d forwards "
          "run; %d fixed texts failed" % (
              len(jobs), time.perf_counter() - started, sum(o.get("import") == "ok" for o in originals),
              sum(v == "ok" for o in originals for k, v in o.items() if k.endswith(".build")),
              sum(isinstance(v, list) for o in originals for k, v in o.items() if k.endswith(".forward")), failed))
    stopped = collections.Counter(o["import.message"][:90] for o in originals if "import.message" in o)
    stopped.update("the runner's time limit" for o in originals if "timeout" in o)
    for message, count in stopped.most_common(8):
        print("  originals stopped at import (%d): %s" % (count, message))
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="corpora: one folder each (added to torch's)")
    parser.add_argument("--no-torch", action="store_true", help="leave out the installed torch's folders")
    parser.add_argument("--fixes", action="store_true", help="also run every fix through the harness")
    parser.add_argument("--no-infer", action="store_true", help="the syntactic layer only (default: with jedi)")
    parser.add_argument("--harness-path", type=Path, action="append", default=[],
                        help="a folder added to the harness's import path (the corpora's own dependencies, "
                             "e.g. installed with pip install --target); repeatable")
    parser.add_argument("--python", type=Path, help="the interpreter torchlint reads the folders' packages "
                        "from (torchlint's --python; manifest corpora with an environment use their own)")
    parser.add_argument("--manifest", type=Path, help="a JSON file of corpora to check too "
                        "(benchmarks/real_code_corpora.json)")
    parser.add_argument("--corpora", type=Path, default=Path("/tmp/bench-signal/corpora"),
                        help="the folder holding the manifest's corpora (default: %(default)s)")
    parser.add_argument("--prepare", action="store_true", help="download the manifest's missing PyPI corpora "
                        "and make its environments first")
    parser.add_argument("--cold", action="store_true", help="each corpus checked with a new, empty "
                        "TORCHLINT_CACHE_DIR and XDG_CACHE_HOME (cold CPU seconds; no answer kept by an earlier run)")
    parser.add_argument("--harness-timeout", type=int, default=3600, help="seconds per corpus for the harness")
    args = parser.parse_args()
    corpora = []
    if not args.no_torch:
        folders = torch_corpus()
        if folders:
            corpora.append(("torch (%s)" % ", ".join(TORCH_FOLDERS), folders, []))
        else:
            print("torch is not installed here: no torch corpus", file=sys.stderr)
    for folder in args.folders:
        if not folder.exists():
            raise SystemExit("no such corpus: %s" % folder)
        corpora.append((folder.name, [folder.resolve()], ["--python", str(args.python)] if args.python else []))
    if args.manifest:
        entries = load_manifest(args.manifest)
        if args.prepare:
            prepare(entries, args.corpora)
        corpora += manifest_corpora(entries, args.corpora)
    mode = ["--no-infer"] if args.no_infer else []
    totals = collections.Counter()
    failures = 0
    print("# torchlint signal on real code (%s)" % ("names only" if args.no_infer else "default mode, with jedi"))
    for name, paths, python in corpora:
        extra = mode + python
        if args.cold:
            COLD_CACHE.append(Path(tempfile.mkdtemp(prefix="torchlint-signal-cache-")))
        files = corpus_files(paths)
        lines = sum(len(p.read_text(encoding="utf-8", errors="replace").splitlines()) for p in files)
        findings, seconds, cpu, notes = findings_of(paths, extra)
        floor = parse_floor(files)
        totals.update(report(name, paths, findings, seconds, cpu, floor, len(files), lines))
        for note in notes:
            print("  " + note)
        totals["files"] += len(files)
        totals["lines"] += lines
        totals["cpu"] += cpu
        totals["floor"] += floor
        if args.cold:
            shutil.rmtree(COLD_CACHE.pop(), ignore_errors=True)
        if args.fixes:
            failures += check_fixes(name, paths, extra, args.harness_timeout, args.harness_path)
    print("\n## all corpora\n\n%d files, %d lines, %.1f CPU s (ast.parse floor %.2f CPU s); findings: %s" % (
        totals["files"], totals["lines"], totals["cpu"], totals["floor"],
        ", ".join("%s %d" % (s, totals[s]) for s in SEVERITIES)))
    if args.fixes:
        print("fixed texts that failed the harness: %d" % failures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
