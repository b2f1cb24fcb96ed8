"""When documents are analysed: at once after a pause, debounced while typing (unless the
document's first wave is cheap: then every edit), off the event loop, never for an old version.

Each analysis starts from a :class:`Snapshot` (uri, version, text) taken when it starts.
When it finishes, the result is kept only if the document is still at that version and
the settings have not changed meanwhile; otherwise it is dropped, unseen. A newer edit
cancels the pending (debounced) analysis of the same document.

Analyses run in waves (:class:`Wave`), those of ``waves`` in order: names alone first, then the
jedi layer refines the findings of the same snapshot (the server's second wave, on its own
executor).

One snapshot's wave is computed once: a pull, a hover or a code action that needs it while
it runs waits for the same computation, and work queued for a version that is no longer
current is skipped when its turn comes.
"""
from __future__ import annotations

import asyncio
import enum
import time
import traceback
from concurrent.futures import Executor
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Deque, Dict, Mapping, Optional, Sequence, Tuple, TypeVar

from ..analysis.findings import CheckResult

Result = TypeVar("Result")

DEBOUNCE_SECONDS = 0.15
# A document whose first wave took less than this (CPU seconds of its thread, whatever else the
# machine runs) is analysed at every edit, typing included: the incremental check of an edit
# usually costs a few milliseconds, and holding it back would only delay the diagnostics
# (benchmarks/README.md#tuned-constants, with RECENT_FIRST_WAVES).
CHEAP_SECONDS = 0.05
# The cheapest of this many last first waves decides: one full check (the open, an edited import,
# a text that does not parse) between cheap incremental ones does not make the next edits wait;
# as many costly ones in a row (typing in an import line) do.
RECENT_FIRST_WAVES = 3


class Wave(enum.IntEnum):
    """One analysis of a snapshot; later waves refine earlier ones (ordered: a later wave's
    result stands for an earlier one's)."""

    NAMES = 0  # the syntactic layer: names alone, at once
    JEDI = 1  # the jedi layer (type inference), on its own executor


@dataclass(frozen=True)
class Snapshot:
    uri: str
    version: Optional[int]
    text: str
    path: str
    generation: int  # settings generation the analysis runs under


# Runs a function and its arguments off the event loop (Scheduler.run): what a feature module is
# given to parse or index a text without holding up every other request.
OffLoop = Callable[..., Awaitable[Any]]


class Stale(Exception):
    """The document changed, closed, or the settings changed while it was analysed."""


@dataclass(eq=False)
class Runs:
    """The scheduler's part of one open document's record (``lsp/state.py``): dropped with it."""

    pending: Optional[asyncio.Task[Any]] = None  # the (debounced) analysis of its last edit
    last_scheduled: float = float("-inf")  # loop time of its last edit
    # CPU seconds of its last first waves (RECENT_FIRST_WAVES at most)
    first_wave_costs: Deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_FIRST_WAVES))
    newest: Optional[Tuple[Snapshot, Wave, CheckResult]] = None  # the newest wave's result: (snapshot, wave, result)

    @property
    def first_wave_cost(self) -> float:
        """What the next first wave is expected to cost: the cheapest recent one (unknown: inf)."""
        return min(self.first_wave_costs, default=float("inf"))

    def stop(self) -> None:
        """The document closed (or lost sync): its pending analysis is cancelled."""
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None


class Scheduler:
    def __init__(self, snapshot: Callable[[str], Optional[Tuple[Optional[int], str, str]]],
                 analyse: Callable[[Snapshot, Wave], CheckResult],
                 publish: Callable[[Snapshot, CheckResult], None],
                 executor: Executor, waves: Sequence[Wave] = (Wave.NAMES,),
                 wave_executors: Optional[Mapping[Wave, Executor]] = None,
                 report: Callable[[str], None] = lambda message: None,
                 runs: Optional[Callable[[str], Optional[Runs]]] = None):
        self._document = snapshot  # uri -> (version, text, path), or None when not open
        self._analyse = analyse  # (snapshot, wave) -> result; runs in the executor: must not touch the event loop
        self._publish = publish  # called on the event loop with current results only
        self._executor = executor
        self._report = report  # logs a failed analysis to the client
        # A slow wave gets its own threads, so it never holds up the fast wave of another edit.
        self._wave_executors = dict(wave_executors or {})
        self.waves = tuple(sorted(waves))  # the first one is what a pull waits for
        self.generation = 0
        # uri -> its Runs, kept in the document's record (None: not open). Without records (a
        # scheduler on its own) it keeps them itself, one per uri it is asked about.
        self._runs = runs or self._own_runs
        self._own: Dict[str, Runs] = {}
        # (snapshot, wave) -> its computation
        self._running: Dict[Tuple[Snapshot, Wave], asyncio.Future[CheckResult]] = {}

    def _own_runs(self, uri: str) -> Runs:
        return self._own.setdefault(uri, Runs())

    # -- state -----------------------------------------------------------------------------
    def snapshot(self, uri: str) -> Optional[Snapshot]:
        document = self._document(uri)
        if document is None:
            return None
        version, text, path = document
        return Snapshot(uri, version, text, path, self.generation)

    def is_current(self, snap: Snapshot) -> bool:
        if snap.generation != self.generation:
            return False
        document = self._document(snap.uri)
        return document is not None and document[0] == snap.version and document[1] == snap.text

    def invalidate(self) -> None:
        """Settings changed: every cached and running analysis is void (a result is kept with
        its snapshot, which names the generation it was computed under: it no longer matches)."""
        self.generation += 1

    def _newest(self, uri: str) -> Optional[Tuple[Snapshot, Wave, CheckResult]]:
        runs = self._runs(uri)
        newest = runs.newest if runs is not None else None
        return newest if newest is not None and newest[0].generation == self.generation else None

    # -- push: debounced, all waves ---------------------------------------------------------
    def schedule(self, uri: str, delay: float = DEBOUNCE_SECONDS) -> None:
        """Analyse soon. The first edit after a pause is analysed at once; edits that follow
        it quickly (typing) wait for a pause of ``delay`` and are analysed together, unless the
        document's first wave is cheap (``CHEAP_SECONDS``, ``RECENT_FIRST_WAVES``)."""
        runs = self._runs(uri)
        if runs is None:  # not open
            return
        loop = asyncio.get_running_loop()
        runs.stop()
        delay = self.delay_for(uri, loop.time(), delay)
        runs.last_scheduled = loop.time()
        runs.pending = loop.create_task(self._run(uri, runs, delay))

    def delay_for(self, uri: str, now: float, delay: float = DEBOUNCE_SECONDS) -> float:
        """How long an edit made at ``now`` waits before its analysis starts."""
        runs = self._runs(uri) or Runs()
        if now - runs.last_scheduled >= delay or runs.first_wave_cost < CHEAP_SECONDS:
            return 0
        return delay

    async def _run(self, uri: str, runs: Runs, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            snap = self.snapshot(uri)
            if snap is None:
                return
            for wave in self.waves:
                result = await self._wave(snap, wave)
                if not self.is_current(snap):
                    return  # a newer edit has its own task
                self._publish(snap, result)
        except asyncio.CancelledError:
            raise
        except Stale:
            return  # superseded before its turn: the newer version has its own task
        except Exception:  # never lose a version's diagnostics silently: say why
            self._report("analysis of %s failed: %s" % (uri, traceback.format_exc()))
        finally:
            if runs.pending is asyncio.current_task():
                runs.pending = None

    # -- pull, hover, code actions: the best result for the current text -------------------
    async def result(self, uri: str, attempts: int = 3) -> Tuple[Snapshot, CheckResult]:
        """The newest result for the document as it is now: the first wave's as soon as it is in
        (never held for a slower wave), or a later one's when that is in already. Raises Stale
        if the document keeps changing underneath, KeyError if it is not open."""
        for _ in range(attempts):
            snap = self.snapshot(uri)
            if snap is None:
                raise KeyError(uri)
            try:
                result = await self._wave(snap, self.waves[0])
            except Stale:
                continue
            if not self.is_current(snap):
                continue
            cached = self._newest(uri)
            if cached is not None and cached[0] == snap:
                return snap, cached[2]
            return snap, result
        raise Stale(uri)

    def newest_wave(self, uri: str) -> Optional[Wave]:
        cached = self._newest(uri)
        return cached[1] if cached is not None else None

    def is_later_wave(self, uri: str) -> bool:
        """Whether the document's newest result is a later wave's than the first."""
        newest = self.newest_wave(uri)
        return newest is not None and newest > self.waves[0]

    async def run(self, function: Callable[..., Result], *args: Any, executor: Optional[Executor] = None) -> Result:
        """Run ``function`` off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(executor or self._executor, function, *args)

    async def _wave(self, snap: Snapshot, wave: Wave) -> CheckResult:
        """Wave ``wave`` of ``snap`` (or a later one already cached), computed once."""
        cached = self._newest(snap.uri)
        if cached is not None and cached[0] == snap and cached[1] >= wave:
            return cached[2]
        key = (snap, wave)
        running = self._running.get(key)
        if running is None:
            running = asyncio.ensure_future(self.run(self._analyse_if_current, snap, wave,
                                                     executor=self._wave_executors.get(wave)))
            self._running[key] = running
            # (mypy cannot type a lambda with a default argument)
            running.add_done_callback(lambda future, key=key: self._finished(key, future))  # type: ignore[misc]
        # Shielded: a caller that gives up (a newer edit) leaves the computation to the others.
        result = await asyncio.shield(running)
        runs = self._runs(snap.uri)
        if runs is not None and self.is_current(snap):
            cached = runs.newest
            if cached is None or cached[0] != snap or cached[1] <= wave:
                runs.newest = (snap, wave, result)
        return result

    def _finished(self, key: Tuple[Snapshot, Wave], future: asyncio.Future[CheckResult]) -> None:
        self._running.pop(key, None)
        if not future.cancelled():
            future.exception()  # retrieved: its awaiters report it, or nobody needed it any more

    def _analyse_if_current(self, snap: Snapshot, wave: Wave) -> CheckResult:
        """In the executor: skip a version that was superseded while it waited for a thread."""
        if not self.is_current(snap):
            raise Stale(snap.uri)
        if wave != self.waves[0]:
            return self._analyse(snap, wave)
        started = time.thread_time()  # the first wave's cost decides the debounce
        result = self._analyse(snap, wave)
        runs = self._runs(snap.uri)
        if runs is not None:
            runs.first_wave_costs.append(time.thread_time() - started)
        return result
