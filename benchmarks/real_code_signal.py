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

Fetched sources are corpora for this benchmark only: keep them outside the repository.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
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


def torchlint(args, cwd=None, timeout=3600):
    """Runs the CLI of this checkout with the interpreter running this script."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "server"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "torchlint", "check", "--exit-zero"] + args, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env)


def findings_of(paths, extra):
    started = time.perf_counter()
    done = torchlint(["--format", "json"] + extra + [str(p) for p in paths])
    if done.returncode != 0:
        raise SystemExit("torchlint failed (exit %d): %s" % (done.returncode, done.stderr[-2000:]))
    return json.loads(done.stdout), time.perf_counter() - started


def display(filename, paths):
    for path in paths:
        base = path if path.is_dir() else path.parent
        try:
            return "%s/%s" % (base.name, Path(filename).relative_to(base))
        except ValueError:
            continue
    return filename


def report(name, paths, findings, seconds, files, lines):
    severity = collections.Counter(f["severity"] for f in findings)
    per_rule = collections.defaultdict(collections.Counter)
    for f in findings:
        per_rule[f["code"] or "syntax-error"][f["severity"]] += 1
    print("\n## %s\n" % name)
    print("%d files, %d lines, %.1f s; findings: %s" % (
        files, lines, seconds, ", ".join("%s %d" % (s, severity[s]) for s in SEVERITIES)))
    if per_rule:
        print("\n| rule | " + " | ".join(SEVERITIES) + " |\n|---|" + "---|" * len(SEVERITIES))
        for code in sorted(per_rule):
            print("| %s | %s |" % (code, " | ".join(str(per_rule[code][s]) for s in SEVERITIES)))
    shown = [f for f in findings if f["severity"] != "hint"]
    print("\nnon-hint findings (%d):" % len(shown))
    for f in shown:
        print("  %s:%d %s [%s] %s" % (display(f["filename"], paths), f["location"]["row"], f["code"] or "E999",
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
    parser.add_argument("--harness-timeout", type=int, default=3600, help="seconds per corpus for the harness")
    args = parser.parse_args()
    corpora = []
    if not args.no_torch:
        folders = torch_corpus()
        if folders:
            corpora.append(("torch (%s)" % ", ".join(TORCH_FOLDERS), folders))
        else:
            print("torch is not installed here: no torch corpus", file=sys.stderr)
    for folder in args.folders:
        if not folder.exists():
            raise SystemExit("no such corpus: %s" % folder)
        corpora.append((folder.name, [folder.resolve()]))
    extra = ["--no-infer"] if args.no_infer else []
    totals = collections.Counter()
    failures = 0
    print("# torchlint signal on real code (%s)" % ("names only" if args.no_infer else "default mode, with jedi"))
    for name, paths in corpora:
        files = corpus_files(paths)
        lines = sum(len(p.read_text(encoding="utf-8", errors="replace").splitlines()) for p in files)
        findings, seconds = findings_of(paths, extra)
        totals.update(report(name, paths, findings, seconds, len(files), lines))
        totals["files"] += len(files)
        totals["lines"] += lines
        if args.fixes:
            failures += check_fixes(name, paths, extra, args.harness_timeout, args.harness_path)
    print("\n## all corpora\n\n%d files, %d lines; findings: %s" % (
        totals["files"], totals["lines"], ", ".join("%s %d" % (s, totals[s]) for s in SEVERITIES)))
    if args.fixes:
        print("fixed texts that failed the harness: %d" % failures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
