"""Reading a virtual environment's files vs running its interpreter, for the jedi layer.

For one virtual environment (``--python VENV/bin/python``, default: the project's
``.venv``), both ways: the findings on the test fixtures (as ``accuracy.py`` counts
them), and the seconds to create the layer and to warm it (jedi's first trip into torch).
Run it with an interpreter other than the analysed one, or "run" is torchlint's own
interpreter both times:

    PYTHONPATH=server:DIR_WITH_JEDI_AND_PARSO python3 benchmarks/bench_environments.py --python .venv/bin/python
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "server"))

from testkit.expectations import expected_findings  # noqa: E402
from torchlint.inference import layer as inference  # noqa: E402
from torchlint.engine import check_source  # noqa: E402
from torchlint.environments import choose_interpreter  # noqa: E402


def measure(python: str, read: bool) -> dict:
    inference.READ_TRUSTED_VENVS = read
    interpreter = choose_interpreter(explicit=python).interpreter
    started = time.perf_counter()
    layer = inference.JediInference(str(FIXTURES / "jedi_project"), interpreter)
    created = time.perf_counter() - started
    layer.warm()
    warmed = time.perf_counter() - started - created
    files = sorted((FIXTURES / "rules").glob("*.py")) + sorted((FIXTURES / "jedi_project").rglob("*.py"))
    expected = found = wrong = 0
    started = time.perf_counter()
    for path in files:
        text = path.read_text(encoding="utf-8")
        marks = expected_findings(text)
        reported = {(f.range.start.line, f.code) for f in check_source(text, str(path), inference=layer).findings}
        expected += len(marks)
        found += len(reported & marks)
        wrong += len(reported - marks)
    return {"how": "read" if layer.read_only else "run", "create": created, "warm": warmed,
            "check": time.perf_counter() - started, "expected": expected, "found": found, "wrong": wrong,
            "torch": layer.torch_available}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per way; the best is shown")
    parser.add_argument("--one", choices=("run", "read"), help=argparse.SUPPRESS)  # one measurement, as JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.python, args.one == "read")))
        return 0
    best = {}
    for _ in range(args.runs):
        for how in ("run", "read"):
            # A fresh process each time: jedi's in-memory parser cache would favour later runs.
            output = subprocess.run([sys.executable, __file__, "--python", args.python, "--one", how],
                                    capture_output=True, text=True, check=True, timeout=600).stdout
            result = json.loads(output.strip().splitlines()[-1])
            previous = best.get(result["how"])
            if previous is None or result["create"] + result["warm"] < previous["create"] + previous["warm"]:
                best[result["how"]] = result
    print("analysed: %s; torchlint runs on %s" % (args.python, sys.executable))
    print("| way | torch seen | layer created (s) | warm-up (s) | fixtures checked (s) | found / expected "
          "| false positives |")
    print("|---|---|---|---|---|---|---|")
    for how in ("run", "read"):
        r = best[how]
        print("| %s | %s | %.2f | %.2f | %.2f | %d / %d | %d |" % (
            how, "yes" if r["torch"] else "no", r["create"], r["warm"], r["check"], r["found"], r["expected"],
            r["wrong"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
