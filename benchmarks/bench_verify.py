"""How far `torchlint verify` gets with no flags: over the test suite's model zoo (or a package
of your own), per file and in total, the classes it built, those whose gradient checks ran
(TL903/TL904/TL906 with real inputs), those skipped for lack of inputs ("partly verified"),
the findings (error and warning level; information left out), and the seconds.

    .venv/bin/python benchmarks/bench_verify.py [--package DIR] [--exclude TEXT] [--device cpu]
                                                [--timeout 600] [--python PATH] [--root DIR] [--json]

Each file is one `verify_file` run (one child process: the seconds include importing torch).
Where the inputs came from is counted too: the project's own calls (`from <file>:<line>`), the
first layer forward applies, a candidate, another class's forward that called it ("caller"), or
a parent's instance and the call its forward made ("parent"). ``--root`` passes the project
(its tests' calls build classes) as the editor and the CLI do. Nothing here passes or fails: it prints figures.
The target of #22: gradient checks on at least 95 % of the classes built.

``--fresh-set DIR`` (issue 44): DIR holds one folder per project (each is its own root: its
files import each other as the project does). Each model file is verified as it is, then
``plant_bugs.py`` makes a buggy twin of each project per kind of bug (one plant per class that
has a site for it, the file's lines unchanged) and each planted file of the twin is verified.
It prints the classes built and gradient-checked on the clean files, the findings there (false
alarms: every one is a bug of verify), each plant confirmed or not (a finding of one of its
kind's codes, at warning or error level, on the plant's line in the planted file), the seconds
and the peak memory of the largest child process (``getrusage(RUSAGE_CHILDREN)``).

    .venv/bin/python benchmarks/bench_verify.py --fresh-set /tmp/fresh-set/clean \
        --twins /tmp/fresh-set/planted --python /tmp/fresh-set/venv/bin/python
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchlint.verify import VerifyError, verify_file  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from plant_bugs import KINDS, Plant, plant  # noqa: E402

ZOO = ROOT / "tests" / "verify" / "model_zoo"
SKIPPED_FILES = {"__init__.py", "registry.py"}


def origin(inputs: str) -> str:
    """Where a class's inputs came from, in one word."""
    if not inputs:
        return "none"
    if ".forward, its call of " in inputs:
        return "parent"  # the instance a parent of the file holds, fed from its forward
    if "the first layer forward applies" in inputs:
        return "data flow"
    if "a candidate)" in inputs:
        return "candidate"
    if "(seen when " in inputs:
        return "caller"
    if "(from --" in inputs:
        return "given"
    if "(from " in inputs:
        return "code"
    return "other"


def run(files, python, device, timeout, root=None, reports=None):
    """One row per file verified; ``reports``: a dict that gets each file's report too."""
    rows = []
    for path in files:
        started = time.monotonic()
        try:
            report = verify_file(str(path), python=python, device=device, timeout=timeout,
                                 workspace_root=str(root) if root else None)
        except VerifyError:
            continue  # a file without a class (a training script, a registry): nothing to verify
        seconds = time.monotonic() - started
        if reports is not None:
            reports[path] = report
        built = [c for c in report.classes if c.status != "skipped"]
        ran = [c for c in built if any(k.code == "TL903" and k.status != "skipped" for k in c.checks)]
        partly = [c for c in built if c.status == "partly verified"]
        findings = [i for i in report.issues if i.severity in ("error", "warning")]
        origins = {}
        for cls in ran:
            key = origin(cls.inputs or "")
            origins[key] = origins.get(key, 0) + 1
        rows.append({"file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                     "outcome": report.outcome, "classes": len(report.classes), "built": len(built),
                     "gradient_checks": len(ran), "skipped_no_inputs": len(partly),
                     "not_built": len(report.classes) - len(built), "findings": len(findings),
                     "seconds": round(seconds, 2), "inputs_from": origins,
                     "partly": [(c.name, c.partial_reason) for c in partly],
                     "unbuilt": [(c.name, c.skip_reason) for c in report.classes if c.status == "skipped"],
                     "unchecked": [c.name for c in built if c not in ran],
                     # (a finding in another file: a class this file's class holds)
                     "issues": [(i.code, i.severity, i.line, i.message, i.file) for i in findings],
                     # the largest child process so far (a file that raises it is the one that took it)
                     "peak_child_mb_so_far": round(peak_child_mb())})
    return rows


def model_files(folder: Path, exclude=()):
    return sorted(p for p in folder.rglob("*.py") if p.name not in SKIPPED_FILES and "__pycache__" not in p.parts
                  and not any(text in str(p) for text in exclude))


def peak_child_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0  # KiB on Linux


def confirmed_by(found: Plant, path: Path, report) -> list:
    """The findings of the planted file's report that confirm the plant: one of its kind's codes,
    at warning or error level, on a line of the statement it rewrote, in that file."""
    return [i for i in report.issues
            if i.code in found.codes() and i.severity in ("error", "warning") and i.line is not None
            and found.line <= i.line <= found.end_line
            and (i.file is None or Path(i.file).resolve() == path.resolve())]


def fresh_set(args) -> int:
    """Clean files, then the planted twins: see the module's docstring."""
    clean_root = args.fresh_set.resolve()
    projects = sorted(p for p in clean_root.iterdir() if p.is_dir() and not p.name.startswith("."))
    twins_root = args.twins or Path(tempfile.mkdtemp(prefix="torchlint-planted-"))
    kinds = args.kind or list(KINDS)
    started = time.monotonic()
    rows, reports = [], {}
    if not args.planted_only:
        for project in projects:
            rows += run(model_files(project, args.exclude), args.python, args.device, args.timeout, project, reports)
    clean_seconds = time.monotonic() - started
    results = []  # (project, file, plant, confirming findings, the class's status in the twin)
    twin_rows = []
    if not args.clean_only:
        for kind in kinds:
            for project in projects:
                twin = twins_root / kind / project.name
                if twin.exists():
                    shutil.rmtree(twin)
                shutil.copytree(project, twin, ignore=shutil.ignore_patterns("__pycache__"))
                planted = []
                for path in model_files(twin, args.exclude):
                    text, plants = plant(path.read_text(encoding="utf-8"), kind)
                    if plants:
                        path.write_text(text, encoding="utf-8")
                        planted.append((path, plants))
                twin_reports = {}
                twin_rows += run([path for path, _ in planted], args.python, args.device, args.timeout, twin,
                                 twin_reports)
                for path, plants in planted:
                    report = twin_reports.get(path)
                    for found in plants:
                        confirming = confirmed_by(found, path, report) if report else []
                        status = next((c.status for c in report.classes if c.name == found.class_name), "?") \
                            if report else "not run"
                        other = [(i.code, i.severity, i.line) for i in report.issues
                                 if i.class_name == found.class_name] if report else []
                        results.append({"project": project.name, "file": str(path.relative_to(twin)),
                                        "kind": kind, "class": found.class_name, "attribute": found.attribute,
                                        "lines": [found.line, found.end_line],
                                        "confirmed": [(i.code, i.severity, i.line) for i in confirming],
                                        "status": status, "class_findings": other})
    total_seconds = time.monotonic() - started
    total, _ = totals(rows)
    by_kind = {}
    for result in results:
        done, planted = by_kind.get(result["kind"], (0, 0))
        by_kind[result["kind"]] = (done + bool(result["confirmed"]), planted + 1)
    summary = {"clean": total, "clean_seconds": round(clean_seconds, 1), "total_seconds": round(total_seconds, 1),
               "peak_child_mb": round(peak_child_mb()), "planted": len(results),
               "confirmed": sum(1 for r in results if r["confirmed"]), "by_kind": by_kind,
               "twin_findings": sum(row["findings"] for row in twin_rows)}
    if args.json:
        print(json.dumps({"files": rows, "plants": results, "summary": summary}, indent=2))
        return 0
    print_rows(rows)
    if results:
        print("\nplanted bugs (one kind per twin, one plant per class):")
        for kind, (done, planted) in by_kind.items():
            print("  %-32s %3d of %3d confirmed" % (kind, done, planted))
        for result in results:
            if not result["confirmed"]:
                print("  not confirmed: %s/%s:%d-%d %s %s.%s (class %s; its findings: %s)" % (
                    result["project"], result["file"], result["lines"][0], result["lines"][1], result["kind"],
                    result["class"], result["attribute"], result["status"], result["class_findings"] or "none"))
    built, ran, classes = total["built"], total["gradient_checks"], total["classes"]
    print("\nclean: %d classes, %d built (%.0f %%), %d gradient-checked (%.0f %%), %d findings (false alarms)" % (
        classes, built, 100.0 * built / classes if classes else 0, ran, 100.0 * ran / classes if classes else 0,
        total["findings"]))
    print("planted: %d of %d confirmed on their line; %d findings on the twins in all" % (
        summary["confirmed"], summary["planted"], summary["twin_findings"]))
    print("seconds: %.0f clean, %.0f in all; peak memory of a child process: %.0f MB" % (
        clean_seconds, total_seconds, summary["peak_child_mb"]))
    return 0


def totals(rows):
    """The rows' counts summed, and where the inputs of the gradient-checked classes came from."""
    total = {key: sum(row[key] for row in rows) for key in
             ("classes", "built", "gradient_checks", "skipped_no_inputs", "not_built", "findings", "seconds")}
    origins = {}
    for row in rows:
        for key, value in row["inputs_from"].items():
            origins[key] = origins.get(key, 0) + value
    return total, origins


def print_rows(rows) -> None:
    total, origins = totals(rows)
    header = "%-44s %5s %5s %9s %9s %8s %7s" % (
        "file", "built", "grads", "no inputs", "not built", "findings", "seconds")
    print(header)
    print("-" * len(header))
    for row in rows:
        print("%-44s %5d %5d %9d %9d %8d %7.1f%s" % (
            row["file"][-44:], row["built"], row["gradient_checks"], row["skipped_no_inputs"], row["not_built"],
            row["findings"], row["seconds"], "" if row["outcome"] == "completed" else "  (%s)" % row["outcome"]))
    print("-" * len(header))
    print("%-44s %5d %5d %9d %9d %8d %7.1f" % (
        "total", total["built"], total["gradient_checks"], total["skipped_no_inputs"], total["not_built"],
        total["findings"], total["seconds"]))
    share = 100.0 * total["gradient_checks"] / total["built"] if total["built"] else 0.0
    print("\ngradient checks ran on %d of %d classes built (%.0f %%); inputs from: %s" % (
        total["gradient_checks"], total["built"], share,
        ", ".join("%s %d" % item for item in sorted(origins.items(), key=lambda item: -item[1]))))
    for row in rows:
        for name, reason in row["partly"]:
            print("  partly verified: %s %s (%s)" % (row["file"], name, reason))
    for row in rows:
        for name, reason in row["unbuilt"]:
            print("  not built: %s %s (%s)" % (row["file"], name, (reason or "")[:300]))
    for row in rows:
        for name in row["unchecked"]:
            print("  built, no gradient check: %s %s" % (row["file"], name))
    for row in rows:
        for code, severity, line, message, where in row["issues"]:
            shown = row["file"] if where is None or Path(where).resolve() == (ROOT / row["file"]).resolve() else "%s (in %s's run)" % (
                where, row["file"])
            print("  finding: %s:%s %s %s %s" % (shown, line, code, severity, message[:300]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", type=Path, default=ZOO, help="a folder of model files (default: the zoo)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--python", default=None, help="the interpreter with torch (default: torchlint's choice)")
    parser.add_argument("--exclude", action="append", default=[], metavar="TEXT",
                        help="leave out files whose path contains TEXT (repeatable)")
    parser.add_argument("--root", default=None, help="the project whose calls build the classes (default: none, "
                        "as verify_file without a workspace)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fresh-set", type=Path, default=None, metavar="DIR",
                        help="one folder per project: verify its files, then buggy twins of them (see above)")
    parser.add_argument("--twins", type=Path, default=None, metavar="DIR",
                        help="where --fresh-set writes the twins (default: a new temporary folder)")
    parser.add_argument("--kind", action="append", default=[], choices=sorted(KINDS),
                        help="plant only this kind (repeatable; default: all)")
    parser.add_argument("--clean-only", action="store_true", help="--fresh-set: no twins")
    parser.add_argument("--planted-only", action="store_true", help="--fresh-set: only the twins")
    args = parser.parse_args(argv)
    if args.fresh_set:
        return fresh_set(args)
    rows = run(model_files(args.package, args.exclude), args.python, args.device, args.timeout, args.root)
    total, origins = totals(rows)
    if args.json:
        print(json.dumps({"files": rows, "total": total, "inputs_from": origins}, indent=2))
        return 0
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
