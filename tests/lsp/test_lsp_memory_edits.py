"""What the server keeps about a document does not grow with the number of edits (issue 23).

In this process, as in test_document_records.py, with pushes recorded instead of sent; each
edit is a didChange notification handed to the server's protocol, which updates the workspace
and calls the server's handler as it does for a message read from the client. The edits come
as an editor sends them, some waited for and some in bursts faster than the waves (work queued,
superseded and cancelled on the way); after each round, once the server is idle, the entries of
every container the document's record, the scheduler, the server and its protocol hold are
counted. Counts after 120 edits and after 360 must be the same: a store that keeps something per
version, per edit or per cancelled run grows between the two (pygls 2.1 kept a future per
didChange until the server's protocol dropped them)."""
import asyncio
import collections
import time

from lsprotocol import types
from pygls.workspace import Workspace

from torchlint.lsp import server as lsp_server
from torchlint.lsp.scheduler import CHEAP_SECONDS, DEBOUNCE_SECONDS, RECENT_FIRST_WAVES, Scheduler

URI = "untitled:Untitled-7"  # no path: no jedi interpreter to start; the scheduler runs both waves all the same
BOUND = 60  # seconds any wait here may take
CLASSES = 40


def model_text() -> str:
    """A module of CLASSES small models, one finding each (a plain tensor attribute)."""
    parts = ["import torch\nfrom torch import nn\n"]
    for n in range(CLASSES):
        parts.append("\n\nclass Block%d(nn.Module):\n    def __init__(self, width):\n        super().__init__()\n"
                     "        self.scale = torch.ones(width)\n        self.proj = nn.Linear(width, width)\n\n"
                     "    def forward(self, x):\n        y = self.proj(x)\n        return y * self.scale\n" % n)
    return "".join(parts)


def edit_lines(text: str):
    """0-based lines of ``y = self.proj(x)``, one per class: where a line goes in below."""
    return [n for n, line in enumerate(text.split("\n")) if line == "        y = self.proj(x)"]


def typing_cycle(site: int, name: str):
    """Four edits at one place that leave the text as it was: a new line, a character typed into
    it, the character deleted, the line deleted. Every text parses."""
    below = site + 1
    head = "        %s = 1e-" % name
    point = types.Position(line=below, character=len(head))
    return [
        (types.Range(start=types.Position(line=below, character=0), end=types.Position(line=below, character=0)),
         head + "5\n"),
        (types.Range(start=point, end=point), "0"),
        (types.Range(start=point, end=types.Position(line=below, character=len(head) + 1)), ""),
        (types.Range(start=types.Position(line=below, character=0), end=types.Position(line=below + 1, character=0)),
         ""),
    ]


def entries(value, depth, seen=None) -> int:
    """Entries of the dicts, lists, tuples, sets and deques under ``value``, following the
    attributes of torchlint's own objects ``depth`` levels deep (strings and other values: 0)."""
    seen = set() if seen is None else seen
    if depth < 0 or id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, (dict, list, tuple, set, frozenset, collections.deque)):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        return len(items) + sum(entries(item, depth - 1, seen) for item in items)
    if hasattr(value, "__dict__") and not isinstance(value, type) and type(value).__module__.startswith("torchlint"):
        return sum(entries(item, depth - 1, seen) for item in vars(value).values())
    return 0


def holdings(server) -> dict:
    """What the server holds, counted (the server idle)."""
    record = server.documents.get(URI)
    return {
        "record entries": entries(record, 6),
        "checkers": len(record.checkers),
        "recent first-wave costs": len(record.runs.first_wave_costs),
        "pending analysis": record.runs.pending is not None,
        "computations in flight": len(server.scheduler._running),
        "scheduler's own runs": len(server.scheduler._own),
        "queued first waves": server.executor._work_queue.qsize(),
        "queued jedi waves": server.inference_executor._work_queue.qsize(),
        "asyncio tasks": len(asyncio.all_tasks()) - 1,  # the scenario's own left out
        "protocol's futures": len(server.protocol._request_futures),
        "server entries": entries(server, 4),
    }


def test_what_the_server_keeps_does_not_grow_with_edits():
    server = lsp_server.create_server()
    server.protocol._workspace = Workspace(None)
    pushed = []
    server.push = lambda uri, version, diagnostics: pushed.append((version, len(diagnostics)))
    text = model_text()
    item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text=text)
    sites = edit_lines(text)
    state = {"version": 1, "cycle": 0}

    def change(rng, new_text):
        state["version"] += 1
        identifier = types.VersionedTextDocumentIdentifier(uri=URI, version=state["version"])
        event = types.TextDocumentContentChangePartial(range=rng, text=new_text)
        server.protocol.handle_message(types.DidChangeTextDocumentNotification(
            params=types.DidChangeTextDocumentParams(text_document=identifier, content_changes=[event])))

    async def idle():
        """Until every wave of the current version is in and nothing is queued or running."""
        deadline = time.monotonic() + BOUND
        record = server.documents.get(URI)
        while time.monotonic() < deadline:
            newest = record.runs.newest
            if (record.runs.pending is None and not server.scheduler._running
                    and newest is not None and newest[0].version == state["version"] and newest[1] == 1
                    and server.executor._work_queue.qsize() == 0):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the server did not settle within %d s" % BOUND)

    async def edit_round(cycles):
        """``cycles`` typing cycles: even ones waited for edit by edit, odd ones in one burst."""
        for _ in range(cycles):
            cycle = state["cycle"]
            state["cycle"] += 1
            for rng, new_text in typing_cycle(sites[cycle % len(sites)], "eps_%d" % cycle):
                change(rng, new_text)
                if cycle % 2 == 0:
                    await idle()
                else:
                    await asyncio.sleep(0)  # the loop turns: a run starts and is superseded
        await idle()
        assert server.workspace.get_text_document(URI).source == text  # every cycle undoes itself
        return holdings(server)

    async def scenario():
        server.loop = server.messages.loop = asyncio.get_running_loop()
        server.workspace.put_text_document(item)
        lsp_server.did_open(server, types.DidOpenTextDocumentParams(text_document=item))
        await idle()
        after_few = await edit_round(30)  # 120 edits
        after_many = await edit_round(60)  # 240 more
        return after_few, after_many

    try:
        after_few, after_many = asyncio.run(scenario())
    finally:
        server.executor.shutdown(wait=True)
        server.inference_executor.shutdown(wait=True)
        server.lens_scans.close()
    assert after_many == after_few
    assert after_few["computations in flight"] == 0 and after_few["queued first waves"] == 0
    assert after_few["recent first-wave costs"] <= RECENT_FIRST_WAVES
    # The edits were analysed (the last version's diagnostics went out: one finding per class).
    assert pushed[-1] == (state["version"], CLASSES)


def test_one_costly_first_wave_does_not_make_cheap_edits_wait():
    """A full check (the open, an edited import) among cheap incremental ones leaves the next
    edits analysed at once; RECENT_FIRST_WAVES costly ones in a row make them wait for a pause."""
    from concurrent.futures import ThreadPoolExecutor

    from torchlint.analysis.findings import CheckResult

    uri = "file:///typed.py"
    document = {"version": 0, "text": ""}
    executor = ThreadPoolExecutor(max_workers=1)

    def analyse(snap, wave):
        if "costly" in snap.text:
            started = time.thread_time()
            while time.thread_time() - started < 2 * CHEAP_SECONDS:
                pass  # CPU, not sleep: what the scheduler measures
        return CheckResult([], None)

    async def scenario():
        published = []
        scheduler = Scheduler(lambda _: (document["version"], document["text"], "/typed.py"), analyse,
                              lambda snap, result: published.append(snap.version), executor)
        delays = []
        for text in ["costly"] + ["cheap"] * 3 + ["costly"] + ["costly"] * (RECENT_FIRST_WAVES - 1):
            document["version"] += 1
            document["text"] = "%s = %d\n" % (text, document["version"])
            scheduler.schedule(uri, delay=0)
            for _ in range(500):  # bounded: 10 s at most
                if published and published[-1] == document["version"]:
                    break
                await asyncio.sleep(0.02)
            # An edit typed right after this one (its wave known by then): does it wait for a pause?
            delays.append(scheduler.delay_for(uri, scheduler._runs(uri).last_scheduled + DEBOUNCE_SECONDS / 10))
        return delays

    try:
        delays = asyncio.run(scenario())
    finally:
        executor.shutdown(wait=True)
    opened, cheap, one_costly, costly_in_a_row = delays[0], delays[1:4], delays[4], delays[-1]
    assert opened == DEBOUNCE_SECONDS  # nothing cheap seen yet
    assert cheap == [0, 0, 0]
    assert one_costly == 0
    assert costly_in_a_row == DEBOUNCE_SECONDS
