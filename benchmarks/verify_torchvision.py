"""Runtime verification on real model files: every nn.Module class of torchvision.models,
each file imported as a module of its package, constructed without flags.

    .venv/bin/python benchmarks/verify_torchvision.py [--device auto] [--timeout 600]
                                                      [--only resnet] [--package DIR] [--json]

It installs nothing. When the verification interpreter (``--python``, default: this one)
can import ``torchvision``, the files are ``torchvision/models/**.py``, all healthy, so
every TL901-TL904 or TL906 at warning or error level on them is a **false alarm**. Otherwise (or
with ``--package DIR``) it verifies a package of your own: the default is the test
suite's model zoo, ``tests/verify/model_zoo``, whose classes in ``buggy.py`` carry one
real bug each (**confirmed** when reported, **missed** when not) and whose other classes
are healthy.

Each class is verified on its own (``FILE::Class``: one child process each, so the
seconds are per class and include importing torch). Per class it prints: the result
(clean, "clean, TL903/TL904 skipped" when no inputs fit forward, confirmed, false alarm,
missed, failed = TL905, skipped = not built, timeout),
the seconds, where the constructor arguments came from, and the codes it reported.
Nothing here is a pass/fail test: it prints figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchlint.analysis.context import FileContext  # noqa: E402
from torchlint.analysis.parsing import parse  # noqa: E402
from torchlint.verify import verify_file  # noqa: E402
from torchlint.verify.report import COMPLETED, TIMEOUT  # noqa: E402

ZOO = ROOT / "tests" / "verify" / "model_zoo"
CHECKS = ("TL901", "TL902", "TL903", "TL904", "TL906")
SKIPPED_DIRS = {"__pycache__", "_utils"}


def torchvision_models(python: str) -> Optional[Path]:
    """torchvision/models as the verification interpreter sees it, or None when it cannot import it."""
    try:
        result = subprocess.run([python, "-c", "import os, torchvision.models as m; print(os.path.dirname(m.__file__))"],
                                capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        print("torchvision is not importable by %s: %s" % (
            python, (result.stderr.strip().splitlines() or ["?"])[-1]), file=sys.stderr)
        return None
    return Path(result.stdout.strip())


def model_files(package: Path) -> List[Path]:
    files = []
    for directory, subdirs, names in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        files.extend(Path(directory) / n for n in sorted(names) if n.endswith(".py") and not n.startswith("_"))
    return files


def module_classes(path: Path) -> List[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    tree, _ = parse(text, str(path))
    return [info.name for info in FileContext(text, str(path), tree).module_classes] if tree is not None else []


def _later_step(message: str) -> bool:
    """A TL905 of a step after the first (training crashed once it ran): a bug the zoo plants."""
    return re.search(r"\bstep ([2-9]|\d\d+) of training failed", message) is not None


def judge(report, class_name: str, expect_bug: bool) -> tuple:
    """(result, codes) for one class's run."""
    cls = next((c for c in report.classes if c.name == class_name), None)
    issues = report.issues
    alarms = sorted({i.code for i in issues if i.code in CHECKS and i.severity in ("error", "warning")})
    notes = sorted({i.code for i in issues if i.code in CHECKS and i.severity == "info"})
    codes = alarms + ["%s(info)" % c for c in notes] + sorted({i.code for i in issues if i.code not in CHECKS})
    if report.outcome == TIMEOUT:
        return "timeout", codes
    if expect_bug and any(i.code == "TL905" and _later_step(i.message) for i in issues):
        return "confirmed", codes  # the planted crash of a training loop's second step
    if any(i.code == "TL905" for i in issues) or report.outcome != COMPLETED:
        return "failed", codes
    if cls is None or cls.status == "skipped":
        return "skipped", codes
    if expect_bug:
        return ("confirmed" if alarms else "missed"), codes
    if alarms:
        return "false alarm", codes
    # Without inputs that fit, the gradient checks did not run: clean as far as TL901/TL902 see.
    partial = [c.code for c in cls.checks if c.status == "skipped"]
    return ("clean" if not partial else "clean, %s skipped" % "/".join(partial)), codes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter with torch (default: this one)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per class (default: 600)")
    parser.add_argument("--package", type=Path, help="verify this package folder instead of torchvision.models")
    parser.add_argument("--only", action="append", default=[], help="only files or classes containing this text")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args(argv)

    package = args.package or torchvision_models(args.python)
    healthy_by_definition = args.package is None and package is not None
    if package is None:
        package = ZOO
        print("verifying the test suite's model zoo instead: %s" % package.relative_to(ROOT), file=sys.stderr)
    package = package.resolve()
    rows = []
    print("%-34s %-24s %-12s %7s  %-40s %s" % ("class", "file", "result", "seconds", "built with", "codes"))
    # (a long result such as "clean, TL903/TL904 skipped" pushes its row's columns right)
    for path in model_files(package):
        relative = path.relative_to(package.parent)
        for class_name in module_classes(path):
            if args.only and not any(o in str(relative) or o in class_name for o in args.only):
                continue
            expect_bug = not healthy_by_definition and ("buggy" in path.stem.lower() or "buggy" in class_name.lower())
            started = time.monotonic()
            report = verify_file(str(path), class_name=class_name, device=args.device, timeout=args.timeout,
                                 python=args.python, workspace_root=str(package.parent))
            seconds = time.monotonic() - started
            result, codes = judge(report, class_name, expect_bug)
            cls = next((c for c in report.classes if c.name == class_name), None)
            built = (cls.constructed_with or {}).get("origin", "") if cls is not None else ""
            if result == "skipped" and cls is not None:
                built = (cls.skip_reason or "")[:60]
            if result in ("failed", "timeout"):
                failure = next((i.message for i in report.issues if i.code == "TL905"), report.error or "")
                built = failure[:90]
            rows.append({"class": class_name, "file": str(relative), "result": result, "seconds": round(seconds, 1),
                         "built_with": built, "codes": codes, "device": report.device,
                         "inputs": cls.inputs if cls is not None else None,
                         "checks": {c.code: c.status for c in cls.checks} if cls is not None else {},
                         "issues": [{"code": i.code, "severity": i.severity, "message": i.message, "line": i.line}
                                    for i in report.issues]})
            print("%-34s %-24s %-12s %7.1f  %-40s %s" % (class_name[:34], str(relative)[:24], result, seconds,
                                                       built[:40], " ".join(codes)), flush=True)
    counts = {}
    for row in rows:
        counts[row["result"]] = counts.get(row["result"], 0) + 1
    total = sum(row["seconds"] for row in rows)
    device = next((row["device"] for row in rows if row["device"]), "?")
    print("\n%d classes on %s in %.0fs: %s" % (len(rows), device, total,
                                              ", ".join("%d %s" % (n, r) for r, n in sorted(counts.items()))))
    alarms = [row for row in rows if row["result"] == "false alarm"]
    for row in alarms:
        for issue in row["issues"]:
            if issue["code"] in CHECKS and issue["severity"] in ("error", "warning"):
                print("  false alarm %s %s:%s %s" % (row["class"], row["file"], issue["line"], issue["message"][:160]))
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
