"""The jedi layer's costs, in one process: cold first file, warm per file, peak memory.

    .venv/bin/python benchmarks/make_corpus.py          # once
    .venv/bin/python benchmarks/bench_inference.py [--files N]

Cold = creating the layer + its first file (jedi's first trip into torch included);
warm = each later file, with the names-only time of the same file beside it.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

from torchlint.engine import check_source
from torchlint.inference.layer import JediInference

CORPUS = Path(__file__).resolve().parent / "corpus"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100, help="how many corpus files (default: 100)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    files = sorted(args.corpus.glob("*.py"))[: args.files]
    if not files:
        print("no corpus: run benchmarks/make_corpus.py first", file=sys.stderr)
        return 2
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in files]

    started = time.perf_counter()
    layer = JediInference(str(args.corpus))
    created = time.perf_counter()
    layer.warm()  # jedi's first trip into torch: what the server does in the background
    warmed = time.perf_counter()
    check_source(texts[0][1], texts[0][0], inference=layer)
    cold = time.perf_counter() - started

    warm, names = [], []
    for path, text in texts[1:]:
        t0 = time.perf_counter()
        check_source(text, path, inference=layer)
        t1 = time.perf_counter()
        check_source(text, path)
        names.append(time.perf_counter() - t1)
        warm.append(t1 - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def ms(values, q):
        return 1000 * statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else 1000 * values[0]

    print("files: %d (%s)" % (len(texts), args.corpus))
    print("layer created (environment, sys.path):      %7.0f ms" % (1000 * (created - started)))
    print("warm-up (first inference into torch):       %7.0f ms" % (1000 * (warmed - created)))
    print("cold: layer + warm-up + first file:          %7.0f ms" % (1000 * cold))
    print("warm per file, with jedi:  p50 %6.1f ms  p95 %6.1f ms  mean %6.1f ms" % (
        ms(warm, 50), ms(warm, 95), 1000 * statistics.mean(warm)))
    print("same files, names only:    p50 %6.1f ms  p95 %6.1f ms  mean %6.1f ms" % (
        ms(names, 50), ms(names, 95), 1000 * statistics.mean(names)))
    print("peak RSS of this process:  %.0f MiB" % peak)
    return 0


if __name__ == "__main__":
    sys.exit(main())
