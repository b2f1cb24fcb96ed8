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
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchlint.verify import VerifyError, verify_file  # noqa: E402

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


def run(files, python, device, timeout, root=None):
    rows = []
    for path in files:
        started = time.monotonic()
        try:
            report = verify_file(str(path), python=python, device=device, timeout=timeout, workspace_root=root)
        except VerifyError:
            continue  # a file without a class (a training script, a registry): nothing to verify
        seconds = time.monotonic() - started
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
                     "issues": [(i.code, i.severity, i.line, i.message) for i in findings]})
    return rows


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
    args = parser.parse_args(argv)
    files = sorted(p for p in args.package.rglob("*.py") if p.name not in SKIPPED_FILES and "__pycache__" not in p.parts
                   and not any(text in str(p) for text in args.exclude))
    rows = run(files, args.python, args.device, args.timeout, args.root)
    total = {key: sum(row[key] for row in rows) for key in
             ("classes", "built", "gradient_checks", "skipped_no_inputs", "not_built", "findings", "seconds")}
    origins = {}
    for row in rows:
        for key, value in row["inputs_from"].items():
            origins[key] = origins.get(key, 0) + value
    if args.json:
        print(json.dumps({"files": rows, "total": total, "inputs_from": origins}, indent=2))
        return 0
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
        for code, severity, line, message in row["issues"]:
            print("  finding: %s:%s %s %s %s" % (row["file"], line, code, severity, message[:300]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
