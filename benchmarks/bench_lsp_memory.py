"""How much of the language server's memory comes back once documents are closed (issue 49).

Starts ``python -m torchlint serve`` on a temporary folder of ``--files`` generated model files
(``make_big_model.py``, about ``--lines`` lines each, many ``nn.Module`` classes; each file a
little longer than the one before and headed by its own comment, so that no two texts are the
same), with an inference cache of its own (empty: every answer comes from jedi). Then:

- idle: one small document open, both of its waves in (jedi warmed up, its long-lived state
  frozen);
- after opening: the files opened one at a time, as a user does, each waiting for both waves;
- after closing: all of them closed, once the server is quiet again: when it logs the full
  collection that follows the last close (the collector's own figures: objects freed, seconds
  it took), or, for a server that does not collect, once its memory has not changed for
  ``--steady`` seconds (at most ``--wait`` seconds).

It prints the server's VmRSS at each step (its children, jedi's interpreter if one was started,
beside it), side by side. Nothing here is a test and nothing fails on a slow run. Run it with
the project's interpreter: ``.venv/bin/python benchmarks/bench_lsp_memory.py``.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lsp import PUSH_CAPABILITIES, LspClient, children_rss, memory_snapshot, mib  # noqa: E402
from make_big_model import make_model_source  # noqa: E402

# Names alone cannot tell that make_weight returns a tensor: its jedi wave is jedi's first trip into torch.
SMALL = ("import torch\nfrom torch import nn\n\n\ndef make_weight(n):\n    return torch.zeros(n, n)\n\n\n"
         "class Small(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = make_weight(3)\n")
WAVE_TIMEOUT_S = 300.0  # a jedi wave of a large file on a loaded machine; missing past it, not waited for
# What the server logs after the collection that follows closing documents (torchlint.collection).
COLLECTED = re.compile(r"full collection after closing: (\d+) objects freed in ([\d.]+) s")


def model_files(folder: Path, count: int, lines: int) -> List[Path]:
    paths = []
    for n in range(count):
        path = folder / ("model_%02d.py" % n)
        path.write_text("# model file %d of this benchmark\n" % n + make_model_source(lines + 40 * n), encoding="utf-8")
        paths.append(path)
    return paths


def readings(pid: int) -> Tuple[int, int]:
    """KiB of RSS: the server's, its children's together."""
    snapshot = memory_snapshot(pid)
    return snapshot["server"].get("VmRSS", 0), children_rss(snapshot)


async def open_and_wait(client: LspClient, path: Path) -> int:
    """Open ``path`` (version 1 of its text) and wait for both waves; the waves that came."""
    before = len(client.publishes.get(1, []))
    await client.notify("textDocument/didOpen", {"textDocument": {
        "uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text(encoding="utf-8")}})
    return len(await client.wait_publishes(1, before + 2, WAVE_TIMEOUT_S)) - before


async def after_closing(client: LspClient, pid: int, logged: int, steady: float, wait: float
                        ) -> Tuple[Optional[Tuple[int, float]], float]:
    """(objects freed, seconds) from the server's log of its collection, else None once the memory
    held still for ``steady`` seconds; and how long the wait took."""
    started = time.perf_counter()
    last, since = readings(pid)[0], time.perf_counter()
    while time.perf_counter() - started < wait:
        for message in client.log_messages[logged:]:
            found = COLLECTED.search(message)
            if found:
                return (int(found.group(1)), float(found.group(2))), time.perf_counter() - started
        await asyncio.sleep(0.25)
        now = readings(pid)[0]
        if abs(now - last) > 1024:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= steady:
            break
    return None, time.perf_counter() - started


async def measure(args) -> int:
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-memory-") as temp:
        root = Path(temp)
        paths = model_files(root, args.files, args.lines)
        small = root / "small.py"
        small.write_text(SMALL, encoding="utf-8")
        environment = dict(os.environ, TORCHLINT_CACHE_DIR=str(root / "cache"))
        process = await asyncio.create_subprocess_exec(
            args.python, "-m", "torchlint", "serve", cwd=str(root), env=environment,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        client = LspClient(process)
        rows: List[Tuple[str, Tuple[int, int], str]] = []
        try:
            await asyncio.wait_for(client.request("initialize", {
                "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": PUSH_CAPABILITIES,
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]}), 60)
            await client.notify("initialized", {})
            await open_and_wait(client, small)
            rows.append(("idle (one small document)", readings(process.pid), ""))
            started, missing = time.perf_counter(), 0
            for path in paths:
                missing += 2 - await open_and_wait(client, path)
            rows.append(("after opening %d files" % len(paths), readings(process.pid),
                         "%.0f s%s" % (time.perf_counter() - started, ", %d waves missing" % missing if missing else "")))
            logged = len(client.log_messages)
            for path in paths:
                await client.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
            collected, waited = await after_closing(client, process.pid, logged, args.steady, args.wait)
            note = ("collected %d objects in %.2f s, %.1f s after the last close" % (collected + (waited,))
                    if collected else "no collection logged; steady after %.1f s" % waited)
            rows.append(("after closing them", readings(process.pid), note))
        finally:
            if process.returncode is not None:
                print("the server exited (%s); its stderr ends with:\n%s" % (process.returncode, client.stderr_tail()),
                      file=sys.stderr)
            await client.close()
    idle = rows[0][1][0]
    print("%d files of about %d lines, server: %s -m torchlint serve" % (args.files, args.lines, args.python))
    print("%-28s %12s %14s %14s  %s" % ("", "server MiB", "vs idle", "children MiB", ""))
    for name, (server, children), note in rows:
        print("%-28s %12s %13.0f%% %14s  %s" % (name, mib(server), 100.0 * (server - idle) / idle, mib(children), note))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--steady", type=float, default=30.0,
                        help="seconds of unchanged memory that count as settled (a server that logs no collection)")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait after closing, at most")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the server")
    return asyncio.run(measure(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
