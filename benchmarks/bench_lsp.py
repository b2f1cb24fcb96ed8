"""Editor latency of torchlint's language server, measured over stdio like an editor sees it.

Starts ``python -m torchlint serve``, opens a generated ~3,000-line model file
(``make_big_model.py``) as a push-diagnostics client (no pull capability), and measures:

- cold start: process spawn -> ``initialize`` answered -> ``didOpen`` -> the first
  ``publishDiagnostics`` (wave 1, the syntactic layer) and the second (wave 2, the jedi layer);
- ``--edits`` typing edits, one ``didChange`` at a time (version + 1), each waiting for both
  publishes of its version before the next: didChange -> wave 1 and -> wave 2, p50/p95/max,
  as the editor waits (the server analyses an edit after a pause at once), the first ``--warmup`` edits left out;
- the server's memory (VmRSS, VmHWM from /proc) and its children's (jedi's interpreter) before
  and after ``--memory-edits`` more edits, and every ``--memory-every`` edits between: those
  edits name their new line after the cycle (``eps_17 = 1e-5``), so no text repeats and a cache
  keyed by text cannot hide growth. ``--typing-ms`` sends those edits at a typing pace without
  waiting for the waves (work queues and is superseded); ``--counts`` runs the server under a
  wrapper that reports, at each reading, what it holds (``COUNTING_SERVER``); ``--burn`` puts
  CPU spinners beside it (a loaded machine).

``--fixes N`` measures instead, on a generated 4,000-line file, how long a fixed finding stays
shown: N fixes (a finding's preferred fix as one ``didChange``), each timed until the client
shows it gone, for a push client and then a pull client with Neovim 0.11's capabilities (it
pulls at once after the change and cannot be asked to pull again), printed side by side;
``--save`` sends ``didSave`` before each fix, so that the fix's jedi wave checks the whole file.

It prints figures; nothing here is a test and nothing fails on a slow run. Run it with the
project's interpreter: ``.venv/bin/python benchmarks/bench_lsp.py``.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import datetime
import json
import math
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_big_model import make_model_source  # noqa: E402

DEBOUNCE_MS = 150.0  # the server's didChange debounce (torchlint.lsp.scheduler.DEBOUNCE_SECONDS)
CHEAP_MS = 50.0  # below this a document is analysed at every edit (torchlint.lsp.scheduler.CHEAP_SECONDS)
WAVE_TIMEOUT_S = 30.0  # a wave that takes longer is reported missing, not waited for forever


# -- a small LSP client: JSON-RPC with Content-Length framing over the server's pipes ----------

class LspClient:
    """Just enough of an LSP client to time diagnostics: requests, notifications, and the
    arrival time of every ``publishDiagnostics``, taken as soon as its frame is read."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self._next_id = 0
        self._answers: Dict[int, asyncio.Future] = {}
        self.publishes: Dict[Optional[int], List[Tuple[float, int]]] = {}  # version -> [(time, count)]
        self.log_messages: List[str] = []
        self._published = asyncio.Event()
        self._stderr: List[bytes] = []
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._drain_stderr())]

    def _write(self, message: Dict[str, Any]) -> None:
        body = json.dumps(message).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        answer = asyncio.get_running_loop().create_future()
        self._answers[self._next_id] = answer
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        await self.process.stdin.drain()
        return await answer

    async def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})
        await self.process.stdin.drain()

    async def _read(self) -> None:
        stdout = self.process.stdout
        while True:
            length = None
            while True:
                line = await stdout.readline()
                if not line:
                    return  # the server exited
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = await stdout.readexactly(length)
            arrived = time.perf_counter()
            self._dispatch(json.loads(body), arrived)

    def _dispatch(self, message: Dict[str, Any], arrived: float) -> None:
        method = message.get("method")
        if method is None:  # an answer to one of our requests
            answer = self._answers.pop(message.get("id"), None)
            if answer is not None and not answer.done():
                if "error" in message:
                    answer.set_exception(RuntimeError("%s" % message["error"]))
                else:
                    answer.set_result(message.get("result"))
        elif "id" in message:  # a request from the server (none expected with our capabilities)
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "textDocument/publishDiagnostics":
            params = message["params"]
            self.publishes.setdefault(params.get("version"), []).append((arrived, len(params["diagnostics"])))
            self._published.set()
        elif method == "window/logMessage":
            self.log_messages.append(message["params"]["message"])

    async def _drain_stderr(self) -> None:
        while True:
            chunk = await self.process.stderr.read(65536)
            if not chunk:
                return
            self._stderr.append(chunk)

    def stderr_tail(self, chars: int = 2000) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")[-chars:]

    async def wait_publishes(self, version: int, count: int, timeout: float) -> List[Tuple[float, int]]:
        """The first ``count`` publishes of ``version`` (fewer if the timeout runs out)."""
        deadline = time.perf_counter() + timeout
        while len(self.publishes.get(version, [])) < count:
            left = deadline - time.perf_counter()
            if left <= 0 or self.process.returncode is not None:
                break
            self._published.clear()
            try:
                await asyncio.wait_for(self._published.wait(), left)
            except asyncio.TimeoutError:
                break
        return self.publishes.get(version, [])[:count]

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 10)
            await self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 10)
        except (asyncio.TimeoutError, ConnectionError, RuntimeError):
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
        for task in self._tasks:
            task.cancel()


# -- the edits: realistic typing in method bodies, every text still parses -------------------

@dataclass
class Edit:
    line: int  # 0-based, LSP
    start: int
    end_line: int
    end: int
    text: str


def edit_sites(text: str) -> List[int]:
    """0-based lines of local assignments in method bodies (8 spaces in), spread over the file."""
    lines = text.split("\n")
    # A whole statement (brackets closed) followed by one at the same depth: a line fits between.
    sites = [n for n, line in enumerate(lines[:-1]) if re.match(r"        [a-z_][a-z_0-9]* = ", line)
             and all(line.count(o) == line.count(c) for o, c in ("()", "[]", "{}"))
             and re.match(r"        \S", lines[n + 1])]
    if not sites:
        raise SystemExit("no method-body assignments to edit in the generated file")
    step = max(1, len(sites) // 25)  # 25 places from the top of the file to the bottom
    return sites[::step]


def typing_edits(text: str, count: int, unique: bool = False) -> List[Edit]:
    """``count`` edits in cycles of four at one place: add a line below a statement, type a
    character into it, delete that character, delete the line. The text is back to the
    original after each cycle; every intermediate text parses. ``unique``: the added line names
    a variable after its cycle (``eps_17 = 1e-5``), so no intermediate text comes back (caches
    keyed by text cannot hide growth)."""
    sites = edit_sites(text)
    edits = []
    for n in range(count):
        site = sites[(n // 4) % len(sites)]
        below = site + 1
        step = n % 4
        head = "        eps%s = 1e-" % ("_%d" % (n // 4) if unique else "")
        if step == 0:  # a new line below the statement
            edits.append(Edit(below, 0, below, 0, head + "5\n"))
        elif step == 1:  # one character typed: 1e-5 -> 1e-05
            edits.append(Edit(below, len(head), below, len(head), "0"))
        elif step == 2:  # ... and deleted
            edits.append(Edit(below, len(head), below, len(head) + 1, ""))
        else:  # the line deleted
            edits.append(Edit(below, 0, below + 1, 0, ""))
    return edits


def apply_edit(text: str, edit: Edit) -> str:
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[:edit.line]) + edit.start
    end = sum(len(line) + 1 for line in lines[:edit.end_line]) + edit.end
    return text[:start] + edit.text + text[end:]


# -- measuring -------------------------------------------------------------------------------

@dataclass
class EditTiming:
    wave1_ms: Optional[float]
    wave2_ms: Optional[float]
    # Server CPU time (all its threads, from /proc schedstat) from didChange to wave 1 and
    # from wave 1 to wave 2, and how long its threads were ready to run but had no core.
    cpu1_ms: Optional[float] = None
    cpu2_ms: Optional[float] = None
    waiting_ms: Optional[float] = None


@dataclass
class Session:
    spawn_to_initialize_ms: float = 0.0
    spawn_to_wave1_ms: Optional[float] = None
    spawn_to_wave2_ms: Optional[float] = None
    open_to_wave1_ms: Optional[float] = None
    open_to_wave2_ms: Optional[float] = None
    open_findings: Tuple[Optional[int], Optional[int]] = (None, None)
    edits: List[EditTiming] = field(default_factory=list)
    memory_edits: List[EditTiming] = field(default_factory=list)
    memory: List[Tuple[str, Dict[str, Dict[str, int]]]] = field(default_factory=list)
    # (edits of the memory session done, snapshot): every --memory-every edits
    memory_curve: List[Tuple[int, Dict[str, Dict[str, int]]]] = field(default_factory=list)
    counts: List[Tuple[int, Dict[str, Any]]] = field(default_factory=list)  # --counts: (edits done, reading)
    log_messages: List[str] = field(default_factory=list)
    server_pid: int = 0


def process_memory(pid: int) -> Dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in KiB, from /proc."""
    values = {}
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                name, _, rest = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    values[name] = int(rest.split()[0])
    except OSError:
        pass
    return values


def thread_times(pid: int) -> Optional[Tuple[int, int]]:
    """Nanoseconds the server's threads spent on a CPU, and waiting for one, summed."""
    run = wait = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as schedstat:
                fields = schedstat.read().split()
        except OSError:
            continue  # a thread that just ended
        run += int(fields[0])
        wait += int(fields[1])
    return run, wait


def child_pids(pid: int) -> List[int]:
    """Direct children of ``pid`` (jedi starts a helper process for the inferred interpreter)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return sorted(children)


def process_role(pid: int) -> str:
    """What a child of the server is, from its command line."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as cmdline:
            argv = cmdline.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return "gone"
    if any("jedi" in part and "subprocess" in part for part in argv):
        return "jedi's interpreter"
    return os.path.basename(argv[0]) if argv and argv[0] else "?"


def memory_snapshot(pid: int) -> Dict[str, Dict[str, int]]:
    snapshot = {"server": process_memory(pid)}
    for child in child_pids(pid):
        snapshot["child %d (%s)" % (child, process_role(child))] = process_memory(child)
    return snapshot


def children_rss(snapshot: Dict[str, Dict[str, int]]) -> int:
    """KiB of RSS of the server's children together."""
    return sum(values.get("VmRSS", 0) for name, values in snapshot.items() if name.startswith("child"))


async def run_edits(client: LspClient, uri: str, text: str, edits: List[Edit], version: int,
                    timings: List[EditTiming], sample_every: int = 0,
                    samples: Optional[List[Tuple[int, Dict[str, Dict[str, int]]]]] = None,
                    typing_ms: float = 0, counts: Optional[Tuple[Path, List[Tuple[int, Dict[str, Any]]]]] = None
                    ) -> Tuple[str, int]:
    """Send ``edits`` one at a time, each waiting for both waves (``typing_ms``: one every that
    many ms, waiting for nothing, as fast typing comes; the waves of the last one sent are waited
    for before each reading); every ``sample_every`` edits the server's memory goes into
    ``samples``, and with ``counts`` (file, list) the counting server's reading into the list."""
    pid = client.process.pid
    for done, edit in enumerate(edits, 1):
        version += 1
        text = apply_edit(text, edit)
        change = {"range": {"start": {"line": edit.line, "character": edit.start},
                            "end": {"line": edit.end_line, "character": edit.end}},
                  "text": edit.text}
        before = thread_times(pid)
        sent = time.perf_counter()
        await client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                       "contentChanges": [change]})
        reading = sample_every and samples is not None and (done % sample_every == 0 or done == len(edits))
        if typing_ms and not reading:
            await asyncio.sleep(max(0.0, typing_ms / 1000 - (time.perf_counter() - sent)))
            continue
        await client.wait_publishes(version, 1, WAVE_TIMEOUT_S)
        after_wave1 = thread_times(pid)
        waves = await client.wait_publishes(version, 2, WAVE_TIMEOUT_S)
        after_wave2 = thread_times(pid)
        if not typing_ms:
            times = [(arrived - sent) * 1000 for arrived, _ in waves] + [None, None]
            timing = EditTiming(times[0], times[1])
            if before and after_wave1 and after_wave2 and len(waves) == 2:
                timing.cpu1_ms = (after_wave1[0] - before[0]) / 1e6
                timing.cpu2_ms = (after_wave2[0] - after_wave1[0]) / 1e6
                timing.waiting_ms = (after_wave2[1] - before[1]) / 1e6
            timings.append(timing)
        if reading:
            samples.append((done, dict(memory_snapshot(pid), load={"1 min": os.getloadavg()[0]})))
            progress = "bench_lsp: %d/%d edits, server RSS %s MiB, load average %.2f" % (
                done, len(edits), mib(samples[-1][1]["server"].get("VmRSS")), os.getloadavg()[0])
            if counts is not None:
                held = await read_counts(client.process, counts[0])
                if held is not None:
                    counts[1].append((done, held))
                    progress += "; holds %s" % {k: v for k, v in held.items() if k != "grew"}
            print(progress, file=sys.stderr, flush=True)  # progress of a long session
    return text, version


def server_command(args) -> List[str]:
    if args.server_command:
        return shlex.split(args.server_command)
    if args.counts:
        return [args.python, "-c", COUNTING_SERVER]
    return [args.python, "-m", "torchlint", "serve"]


# The server under a wrapper (--counts): on SIGUSR1 it appends to $TORCHLINT_BENCH_COUNTS one JSON
# line of what it holds: Python objects, what each document's record and the scheduler keep, the
# work queued on its executors, its asyncio tasks, and with $TORCHLINT_BENCH_TRACEMALLOC=N the
# memory Python traced and the N source lines whose allocations grew most since the first reading;
# always the types whose objects grew most in number since the first reading, then a full
# collection (what it freed: garbage the collector had not reached yet; it changes what follows).
# The handler runs on the main thread, which runs the event loop: no wave is published meanwhile.
COUNTING_SERVER = r"""
import asyncio, gc, json, linecache, os, signal, sys, tracemalloc
from collections import Counter
import torchlint.lsp.server as lsp_server

top = int(os.environ.get("TORCHLINT_BENCH_TRACEMALLOC") or 0)
if top:
    tracemalloc.start(1)
servers, first, first_types = [], [], []
create_server = lsp_server.create_server

def created():
    servers.append(create_server())
    return servers[-1]

def entries(value, depth, seen):
    # Entries of the dicts, lists, sets and deques under value, depth attributes deep.
    if id(value) in seen or depth < 0:
        return 0
    seen.add(id(value))
    if isinstance(value, (dict, list, set, frozenset, tuple)) or type(value).__name__ == "deque":
        items = list(value.values()) if isinstance(value, dict) else list(value)
        return len(items) + sum(entries(item, depth - 1, seen) for item in items[:64])
    if hasattr(value, "__dict__") and not isinstance(value, type) and type(value).__module__.startswith("torchlint"):
        return sum(entries(item, depth - 1, seen) for item in vars(value).values())
    return 0

def count(signum, frame):
    server = servers[0]
    records = list(server.documents)
    # Builtin methods by their object's type and name: whose callbacks are kept.
    types = Counter("%s.%s" % (type(value.__self__).__qualname__, value.__name__)
                    if type(value) is type(len) and value.__self__ is not None else type(value).__qualname__
                    for value in gc.get_objects())
    if not first_types:
        first_types.append(types)
    types.subtract(first_types[0])
    reading = {
        "gc_objects": len(gc.get_objects()), "gc_frozen": gc.get_freeze_count(),
        "records": len(records),
        "record_entries": sum(entries(record, 3, set()) for record in records),
        "checkers": sum(len(record.checkers) for record in records),
        "scheduler_running": len(server.scheduler._running),
        "queued_first_wave": server.executor._work_queue.qsize(),
        "queued_jedi_wave": server.inference_executor._work_queue.qsize(),
        "asyncio_tasks": len(asyncio.all_tasks(server.loop)) if server.loop else 0,
        "grew_types": ["%s %+d" % pair for pair in types.most_common(8) if pair[1] > 0],
    }
    reading["garbage"] = gc.collect()
    if top:
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        reading["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 1e6, 2)
        if not first:
            first.append(snapshot)
        grew = snapshot.compare_to(first[0], "lineno")[:top]
        reading["grew"] = ["%+.1f KB %+d blocks %s:%d %s" % (stat.size_diff / 1e3, stat.count_diff,
                           stat.traceback[0].filename, stat.traceback[0].lineno,
                           linecache.getline(stat.traceback[0].filename, stat.traceback[0].lineno).strip()[:80])
                           for stat in grew]
    with open(os.environ["TORCHLINT_BENCH_COUNTS"], "a") as out:
        out.write(json.dumps(reading) + "\n")

lsp_server.create_server = created
signal.signal(signal.SIGUSR1, count)
sys.exit(lsp_server.main())
"""


async def read_counts(process: asyncio.subprocess.Process, path: Path) -> Optional[Dict[str, Any]]:
    """Ask the counting server for a reading (SIGUSR1) and wait for its line (at most 300 s:
    a tracemalloc snapshot of the server takes a while on a loaded machine)."""
    before = path.read_text().count("\n") if path.exists() else 0
    process.send_signal(signal.SIGUSR1)
    deadline = time.perf_counter() + 300
    while time.perf_counter() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) > before:
            return json.loads(lines[-1])
        await asyncio.sleep(0.05)
    return None


async def measure(args, path: Path, text: str) -> Session:
    session = Session()
    root = path.parent
    uri = path.as_uri()
    spawned = time.perf_counter()
    counts_file = root / "server-counts.jsonl"
    environment = dict(os.environ, TORCHLINT_BENCH_COUNTS=str(counts_file),
                       TORCHLINT_BENCH_TRACEMALLOC=str(args.tracemalloc))
    process = await asyncio.create_subprocess_exec(
        *server_command(args), cwd=str(root), env=environment,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    session.server_pid = process.pid
    client = LspClient(process)
    try:
        capabilities = {  # a push client: publishDiagnostics with versions, no textDocument.diagnostic
            "textDocument": {"synchronization": {"didSave": True, "dynamicRegistration": False},
                             "publishDiagnostics": {"versionSupport": True, "relatedInformation": True,
                                                    "codeDescriptionSupport": True, "dataSupport": True,
                                                    "tagSupport": {"valueSet": [1, 2]}}},
            "general": {"positionEncodings": ["utf-16"]},
        }
        await asyncio.wait_for(client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": capabilities,
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]}), 60)
        session.spawn_to_initialize_ms = (time.perf_counter() - spawned) * 1000
        await client.notify("initialized", {})
        opened = time.perf_counter()
        await client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        waves = await client.wait_publishes(1, 2, WAVE_TIMEOUT_S)
        if waves:
            session.spawn_to_wave1_ms = (waves[0][0] - spawned) * 1000
            session.open_to_wave1_ms = (waves[0][0] - opened) * 1000
        if len(waves) > 1:
            session.spawn_to_wave2_ms = (waves[1][0] - spawned) * 1000
            session.open_to_wave2_ms = (waves[1][0] - opened) * 1000
        session.open_findings = tuple([count for _, count in waves] + [None, None])[:2]
        session.memory.append(("after open", memory_snapshot(process.pid)))

        text, version = await run_edits(client, uri, text, typing_edits(text, args.edits), 1, session.edits)
        session.memory.append(("after %d edits" % args.edits, memory_snapshot(process.pid)))
        if args.memory_edits:
            every = args.memory_every or max(1, args.memory_edits // 10)
            text, version = await run_edits(client, uri, text, typing_edits(text, args.memory_edits, unique=True),
                                            version, session.memory_edits, every, session.memory_curve,
                                            args.typing_ms, (counts_file, session.counts) if args.counts else None)
            session.memory.append(("after %d more edits" % args.memory_edits, memory_snapshot(process.pid)))
        session.log_messages = list(client.log_messages)
    finally:
        if process.returncode is not None:
            print("the server exited (%s); its stderr ends with:\n%s" % (process.returncode, client.stderr_tail()),
                  file=sys.stderr)
        await client.close()
    return session


# -- --fixes: from a fix to the cleared diagnostic, a push client beside a pull client --------

PUSH_CAPABILITIES = {  # a push client: publishDiagnostics with versions, no textDocument.diagnostic
    "textDocument": {"synchronization": {"didSave": True, "dynamicRegistration": False},
                     "publishDiagnostics": {"versionSupport": True, "relatedInformation": True,
                                            "codeDescriptionSupport": True, "dataSupport": True,
                                            "tagSupport": {"valueSet": [1, 2]}}},
    "general": {"positionEncodings": ["utf-16"]},
}
# Neovim 0.11's: it pulls (textDocument/diagnostic) and cannot be asked to pull again.
PULL_CAPABILITIES = {"textDocument": {"synchronization": {"didSave": True, "dynamicRegistration": False},
                                      "diagnostic": {"dynamicRegistration": False}},
                     "general": {"positionEncodings": ["utf-16"]}}


@dataclass
class FixTimings:
    cleared_ms: List[float] = field(default_factory=list)  # didChange (the fix) -> the finding gone
    pulls: List[int] = field(default_factory=list)  # a pull client: pulls it took (1: the first answer was fresh)
    missing: int = 0  # fixes whose finding was still shown after FIX_TIMEOUT_S


FIX_TIMEOUT_S = 120.0


def fixes_to_apply(text: str, path: str, count: int) -> List[Tuple[List[Dict[str, Any]], int]]:
    """``count`` fixes of the file's syntactic findings (each the finding's preferred fix, as a
    didChange's content changes, last edit first), with the diagnostics left once it is applied."""
    from torchlint.engine import check_source

    findings = check_source(text, path).findings
    chosen = []
    for finding in findings:
        fix = finding.preferred_fix
        if fix is None or any(e.range.start.line != e.range.end.line for e in fix.edits):
            continue
        changes = [{"range": {"start": {"line": e.range.start.line - 1, "character": e.range.start.column},
                              "end": {"line": e.range.end.line - 1, "character": e.range.end.column}},
                    "text": e.new_text} for e in sorted(fix.edits, key=lambda e: e.range.start, reverse=True)]
        fixed = text
        for e in sorted(fix.edits, key=lambda e: e.range.start, reverse=True):
            lines = fixed.split("\n")
            start = sum(len(line) + 1 for line in lines[:e.range.start.line - 1]) + e.range.start.column
            end = sum(len(line) + 1 for line in lines[:e.range.end.line - 1]) + e.range.end.column
            fixed = fixed[:start] + e.new_text + fixed[end:]
        left = len(check_source(fixed, path).findings)
        if left == len(findings) - 1:
            chosen.append((changes, left))
    if not chosen:
        raise SystemExit("no fix in the generated file removes exactly its finding")
    return [chosen[n % len(chosen)] for n in range(count)]


async def pull_count(client: LspClient, uri: str) -> int:
    report = await client.request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
    return len(report.get("items") or [])


async def fix_session(args, path: Path, text: str, shown: Optional[Tuple[int, int]] = None
                      ) -> Tuple[FixTimings, Tuple[int, int]]:
    """One server, one client: open the file, then each fix as one didChange, timed until the
    client shows the finding gone, then the whole text put back and both waves waited for. A
    push client without ``shown``; a pull client with ``shown``, what the push client was shown
    of the file (the first wave's diagnostics, the jedi wave's): it pulls at once after each
    change, as Neovim does, and again until the finding is gone. Answers the timings and what
    the client was shown of the file."""
    pull = shown is not None
    timings = FixTimings()
    uri = path.as_uri()
    process = await asyncio.create_subprocess_exec(
        *server_command(args), cwd=str(path.parent), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    client = LspClient(process)
    try:
        await asyncio.wait_for(client.request("initialize", {
            "processId": os.getpid(), "rootUri": path.parent.as_uri(),
            "capabilities": PULL_CAPABILITIES if pull else PUSH_CAPABILITIES,
            "workspaceFolders": [{"uri": path.parent.as_uri(), "name": path.parent.name}]}), 60)
        await client.notify("initialized", {})
        await client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        version = 1
        settled = await settle_both_waves(client, uri, version, shown)
        for changes, left in fixes_to_apply(text, str(path), args.fixes):
            if args.save:  # as after :w, jedi's next check of the file is a whole one
                await client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            version += 1
            sent = time.perf_counter()
            await client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                           "contentChanges": changes})
            cleared, pulls = await until_cleared(client, uri, version, left + (settled[1] - settled[0]), pull)
            if cleared is None:
                timings.missing += 1
            else:
                timings.cleared_ms.append((cleared - sent) * 1000)
                timings.pulls.append(pulls)
            version += 1  # put the text back (a whole-text change), both waves in before the next fix
            await client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                           "contentChanges": [{"text": text}]})
            await settle_both_waves(client, uri, version, shown)
    finally:
        await client.close()
    return timings, settled


async def settle_both_waves(client: LspClient, uri: str, version: int,
                            shown: Optional[Tuple[int, int]]) -> Tuple[int, int]:
    """Both waves of ``version`` in: (the first wave's diagnostics, the jedi wave's). A pull
    client (``shown``: what the push client was shown) pulls until it is shown the jedi wave's."""
    if shown is None:
        waves = await client.wait_publishes(version, 2, FIX_TIMEOUT_S)
        counts = [count for _, count in waves] + [0, 0]
        return counts[0], counts[1] if len(waves) > 1 else counts[0]
    deadline = time.perf_counter() + FIX_TIMEOUT_S
    while time.perf_counter() < deadline and await pull_count(client, uri) != shown[1]:
        await asyncio.sleep(0.05)
    return shown


async def until_cleared(client: LspClient, uri: str, version: int, left: int,
                        pull: bool) -> Tuple[Optional[float], int]:
    """When the client showed ``left`` diagnostics or fewer for ``version`` (None: not within
    FIX_TIMEOUT_S), and how many pulls it took. ``left``: what remains once the fix is in, the
    jedi wave's own findings counted."""
    deadline = time.perf_counter() + FIX_TIMEOUT_S
    if not pull:
        seen = 0
        while time.perf_counter() < deadline:
            publishes = await client.wait_publishes(version, seen + 1, deadline - time.perf_counter())
            fresh = [arrived for arrived, count in publishes[seen:] if count <= left]
            if fresh:
                return fresh[0], 0
            if len(publishes) <= seen:
                break
            seen = len(publishes)
        return None, 0
    pulls = 0
    while time.perf_counter() < deadline:
        pulls += 1
        if await pull_count(client, uri) <= left:
            return time.perf_counter(), pulls
        await asyncio.sleep(0.05)
    return None, pulls


def fix_report(args, text: str, push: FixTimings, pulled: FixTimings, load: Tuple[float, float]) -> None:
    print("torchlint LSP, from a fix to the cleared diagnostic, %s" % datetime.date.today().isoformat())
    print("machine: %s, %d cores, Python %s; load average %.2f at start, %.2f at end%s"
          % (platform.machine(), os.cpu_count(), platform.python_version(), load[0], load[1],
             "; %d CPU burners beside it (--burn)" % args.burn if args.burn else ""))
    print("file: %d lines, generated by make_big_model.py; server: %s" % (text.count("\n"), " ".join(server_command(args))))
    print("each fix: one didChange applying a finding's preferred fix%s; the pull client (Neovim 0.11's "
          "capabilities: no refresh) pulls at once after it and again until the finding is gone"
          % (", the file saved (didSave) just before: a whole jedi check follows" if args.save else ""))
    print()
    print(table(["fix -> cleared, ms", "n", "p50", "p95", "max", "missed"], [
        stats_row("push client (publishDiagnostics)", push.cleared_ms) + [str(push.missing)],
        stats_row("pull client (textDocument/diagnostic)", pulled.cleared_ms) + [str(pulled.missing)],
    ]))
    if pulled.pulls:
        print("pull client: the first answer after the fix was fresh for %d of %d fixes (most pulls one took: %d)"
              % (sum(1 for n in pulled.pulls if n == 1), len(pulled.pulls), max(pulled.pulls)))


# -- in-process reference: the same text through the core, no LSP ----------------------------

def reference_times(text: str, path: str, runs: int, with_jedi: bool) -> Dict[str, float]:
    """Median milliseconds of ast.parse, check_source, and check_source with a warm jedi
    layer, in this process, on the same text: what the waves cost without the server."""
    from torchlint.engine import check_source

    def median_ms(function) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            function()
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    check_source(text, path)  # rules imported, caches filled
    figures = {"ast.parse": median_ms(lambda: ast.parse(text)),
               "check_source (syntactic)": median_ms(lambda: check_source(text, path))}
    if with_jedi:
        from torchlint.inference.layer import JediInference
        layer = JediInference(str(Path(path).parent))
        layer.warm()
        check_source(text, path, inference=layer)
        figures["check_source + jedi (warm)"] = median_ms(lambda: check_source(text, path, inference=layer))
    return figures


# -- report ----------------------------------------------------------------------------------

def percentile(values: List[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def fmt(value: Optional[float]) -> str:
    return "-" if value is None else "%.1f" % value


def stats_row(name: str, values: List[float]) -> List[str]:
    if not values:
        return [name, "0", "-", "-", "-"]
    return [name, str(len(values)), fmt(percentile(values, 50)), fmt(percentile(values, 95)), fmt(max(values))]


def table(header: List[str], rows: List[List[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]

    def line(row):
        return "| " + " | ".join(str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
                                 for i, (cell, w) in enumerate(zip(row, widths))) + " |"
    rule = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule] + [line(row) for row in rows])


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


def report(args, session: Session, text: str, reference: Dict[str, float], load: Tuple[float, float]) -> None:
    print("torchlint LSP editor latency, %s" % datetime.date.today().isoformat())
    print("machine: %s, %d cores, Python %s; torchlint %s, pygls %s, jedi %s; load average %.2f at start, %.2f at end"
          % (platform.machine(), os.cpu_count(), platform.python_version(), package_version("torchlint"),
             package_version("pygls"), package_version("jedi"), load[0], load[1]))
    print("file: %d lines, %d KiB, generated by make_big_model.py; server: %s (push client)%s"
          % (text.count("\n"), len(text.encode()) // 1024, " ".join(server_command(args)) if not args.counts
             else "%s -m torchlint serve under a counting wrapper (--counts)" % args.python,
             "; %d CPU burners beside it (--burn)" % args.burn if args.burn else ""))
    if args.typing_ms and args.memory_edits:
        print("memory session: an edit every %.0f ms, none waiting for the waves (--typing-ms); each reading "
              "waits for the waves of the edit before it" % args.typing_ms)
    for message in session.log_messages[:3]:
        print("server says: %s" % message)
    print()

    print("Cold start (ms from process spawn; in brackets from didOpen)")
    print(table(["step", "ms"], [
        ["initialize answered", fmt(session.spawn_to_initialize_ms)],
        ["wave 1 published (syntactic), %s diagnostics" % session.open_findings[0],
         "%s (%s)" % (fmt(session.spawn_to_wave1_ms), fmt(session.open_to_wave1_ms))],
        ["wave 2 published (jedi, first trip into torch), %s diagnostics" % session.open_findings[1],
         "%s (%s)" % (fmt(session.spawn_to_wave2_ms), fmt(session.open_to_wave2_ms))],
    ]))
    print()

    warm = session.edits[args.warmup:]
    wave1 = [e.wave1_ms for e in warm if e.wave1_ms is not None]
    wave2 = [e.wave2_ms for e in warm if e.wave2_ms is not None]
    gap = [e.wave2_ms - e.wave1_ms for e in warm if e.wave1_ms is not None and e.wave2_ms is not None]
    missing = sum(1 for e in session.edits if e.wave1_ms is None or e.wave2_ms is None)
    print("Edits: didChange -> publishDiagnostics of that version, ms, %d warm edits "
          "(the first %d excluded as jedi warm-up)" % (len(warm), min(args.warmup, len(session.edits))))
    print("as the editor waits: each edit is sent once the previous one's waves are in; the server "
          "analyses it at once (its %.0f ms debounce only holds back bursts of typing in a document "
          "whose first wave costs %.0f ms of CPU or more)" % (DEBOUNCE_MS, CHEAP_MS))
    print(table(["measure", "n", "p50", "p95", "max"], [
        stats_row("wave 1 (syntactic)", wave1),
        stats_row("wave 2 (jedi)", wave2),
        stats_row("wave 2 after wave 1", gap),
    ]))
    cpu_rows = [stats_row(label, [getattr(e, name) for e in warm if getattr(e, name) is not None]) for name, label in (
        ("cpu1_ms", "server CPU, didChange -> wave 1"), ("cpu2_ms", "server CPU, wave 1 -> wave 2"),
        ("waiting_ms", "server threads ready but without a core"))]
    if any(row[1] != "0" for row in cpu_rows):
        print("The same edits in server CPU time (all its threads, /proc/<pid>/task/*/schedstat): what the")
        print("waves cost whatever else the machine runs; the last row is time lost to other processes")
        print(table(["measure", "n", "p50", "p95", "max"], cpu_rows))
    if args.warmup and session.edits:
        print("excluded warm-up edits, wave 1 / wave 2 raw ms: %s" % ", ".join(
            "%s / %s" % (fmt(e.wave1_ms), fmt(e.wave2_ms)) for e in session.edits[:args.warmup]))
    if missing:
        print("WARNING: %d edits missed a wave within %.0f s" % (missing, WAVE_TIMEOUT_S))
    print("SPEC targets (warm): wave 1 p95 <= 30 ms: %s; wave 2 p95 <= 300 ms: %s" % (
        verdict(wave1, 30.0), verdict(wave2, 300.0)))
    print()

    if session.memory_edits:
        wave1 = [e.wave1_ms for e in session.memory_edits if e.wave1_ms is not None]
        wave2 = [e.wave2_ms for e in session.memory_edits if e.wave2_ms is not None]
        print("Memory session: %d more edits, same kind, each added line named differently (ms)"
              % len(session.memory_edits))
        print(table(["measure", "n", "p50", "p95", "max"], [stats_row("wave 1 (syntactic)", wave1),
                                                            stats_row("wave 2 (jedi)", wave2)]))
        print()
    print("Memory (MiB; RSS now, HWM = peak RSS so far)")
    processes = sorted({name for _, snap in session.memory for name in snap})
    rows = []
    for name in processes:
        row = [name if name != "server" else "server (pid %d)" % session.server_pid]
        for _, snap in session.memory:
            values = snap.get(name, {})
            row.append("%s / %s" % (mib(values.get("VmRSS")), mib(values.get("VmHWM"))))
        rows.append(row)
    print(table(["process"] + ["%s RSS / HWM" % label for label, _ in session.memory], rows))
    if session.memory_curve:
        print()
        print("Memory during the memory session (MiB, every %d edits; children: their RSS together)"
              % (session.memory_curve[0][0]))
        print(table(["edits", "server RSS", "server HWM", "children RSS", "load average"], [
            [str(done), mib(snap["server"].get("VmRSS")), mib(snap["server"].get("VmHWM")), mib(children_rss(snap)),
             "%.2f" % snap["load"]["1 min"]] for done, snap in session.memory_curve]))
    if session.counts:
        print()
        print("What the server holds (--counts), at the same readings")
        names = [name for name in session.counts[0][1] if name not in ("grew", "grew_types")]
        print(table(["edits"] + names, [[str(done)] + [str(held.get(name, "-")) for name in names]
                                        for done, held in session.counts]))
        print("Types whose objects grew most in number from the first reading to the last: %s"
              % ", ".join(session.counts[-1][1].get("grew_types") or ["none"]))
        grew = session.counts[-1][1].get("grew")
        if grew:
            print("Source lines whose live allocations grew most from the first reading to the last (tracemalloc):")
            for line in grew:
                print("  " + line)
    if reference:
        print()
        print("In-process reference, same text, no LSP (median of %d, ms)" % args.reference_runs)
        print(table(["step", "ms"], [[name, fmt(ms)] for name, ms in reference.items()]))


def verdict(values: List[float], target: float) -> str:
    if not values:
        return "not measured"
    p95 = percentile(values, 95)
    return "%s (%.1f ms)" % ("met" if p95 <= target else "MISSED", p95)


@contextlib.contextmanager
def cpu_burners(count: int):
    """``count`` child processes that spin on the CPU until the block ends (then killed)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(30)


def mib(kib: Optional[int]) -> str:
    return "-" if kib is None else "%.0f" % (kib / 1024)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, help="size of the generated file (default 3000; 4000 with --fixes)")
    parser.add_argument("--fixes", type=int, default=0, metavar="N",
                        help="instead of the typing session: N fixes, each timed from its didChange to the "
                             "cleared diagnostic, for a push client and a pull client side by side")
    parser.add_argument("--save", action="store_true",
                        help="with --fixes: the file is saved (didSave) before each fix, so that fix's jedi wave "
                             "checks the whole file, as the first edit after a save does")
    parser.add_argument("--edits", type=int, default=50, help="timed edits (default 50)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="first timed edits left out of the figures while jedi warms up (default 3)")
    parser.add_argument("--memory-edits", type=int, default=200,
                        help="edits between the two memory readings (default 200; 0 skips); each adds "
                             "a differently named line, so no text comes back")
    parser.add_argument("--memory-every", type=int, default=0, metavar="N",
                        help="read the memory every N edits of that session (default: 10 readings)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the server")
    parser.add_argument("--server-command", metavar="CMD",
                        help="command line of the server instead of PYTHON -m torchlint serve "
                             "(to compare a patched server; memory is read for the process it starts)")
    parser.add_argument("--reference-runs", type=int, default=5,
                        help="runs of the in-process reference (default 5; 0 skips it)")
    parser.add_argument("--no-reference-jedi", action="store_true",
                        help="in-process reference without the jedi layer (saves its warm-up)")
    parser.add_argument("--keep", metavar="DIR", help="write the generated file into DIR and keep it")
    parser.add_argument("--typing-ms", type=float, default=0, metavar="MS",
                        help="the memory session's edits come every MS ms without waiting for the waves (typing "
                             "faster than the server: work queues and is superseded); each reading waits for them")
    parser.add_argument("--counts", action="store_true",
                        help="run the server under a wrapper that reports what it holds at each memory reading "
                             "(Python objects, the document's record, the scheduler's computations, queued waves)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                        help="with --counts: trace Python's allocations in the server and list the N source lines "
                             "whose live memory grew most over the memory session (slows the server)")
    parser.add_argument("--burn", type=int, default=0, metavar="N",
                        help="a loaded machine: N processes spinning on the CPU beside the server for the "
                             "whole session (default 0)")
    args = parser.parse_args(argv)
    if args.edits <= args.warmup:
        parser.error("--edits must be more than --warmup")
    if args.tracemalloc and not args.counts:
        parser.error("--tracemalloc needs --counts")
    if args.counts and args.server_command:
        parser.error("--counts runs the server under its own wrapper: not with --server-command")

    if args.lines is None:
        args.lines = 4000 if args.fixes else 3000
    text = make_model_source(args.lines)
    load_start = os.getloadavg()[0]
    if args.fixes:
        return fix_main(args, text, load_start)
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-lsp-") as scratch:
        folder = Path(args.keep or scratch).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "big_model.py"
        path.write_text(text, encoding="utf-8")
        with cpu_burners(args.burn):
            session = asyncio.run(measure(args, path, text))
        reference = (reference_times(text, str(path), args.reference_runs, not args.no_reference_jedi)
                     if args.reference_runs else {})
    report(args, session, text, reference, (load_start, os.getloadavg()[0]))
    return 0


def fix_main(args, text: str, load_start: float) -> int:
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-fix-") as scratch:
        path = Path(args.keep or scratch).resolve() / "big_model.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        with cpu_burners(args.burn):
            push, shown = asyncio.run(fix_session(args, path, text))
            pulled, _ = asyncio.run(fix_session(args, path, text, shown))
    fix_report(args, text, push, pulled, (load_start, os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
