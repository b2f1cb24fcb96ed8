"""What one process of a run keeps while it checks files: its jedi layers, the warnings it has
said, when its garbage collector runs, its log handler. One :class:`ProcessState` per process:
the main process makes one per run; a worker makes its own when it starts
(``workers.start_worker``), so nothing of the parent's crosses the fork."""
from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Generator, Optional, Set, Tuple

from .. import collection
from ..environments import Interpreter, own_interpreter

if TYPE_CHECKING:  # (imported when a layer is made: --no-infer never loads jedi)
    from ..inference.layer import JediInference
    from .checking import Job

# A worker runs with the cyclic garbage collector off. A check frees what it built by reference
# counting (FileContext.release and the rules break their cycles: tests/test_garbage.py); most of
# what outlives it is jedi's model of torch, kept to the end of the run, which every collection
# would walk again (seconds each on a large project). So after each file what it left is put
# out of the collector's reach (gc.freeze: no walk). The jedi layer's trims (WORKER_MEMORY_LIMIT)
# collect what they drop; a worker without one collects the few cycles left as garbage once its
# peak memory has grown by COLLECT_AFTER_GROWTH since the last collection (every COLLECT_EVERY
# files where the peak cannot be read). A worker with one does not collect on growth: such
# collections freed nothing its trims would not. Figures: benchmarks/README.md#tuned-constants.
COLLECT_AFTER_GROWTH = 256 * 2 ** 20
COLLECT_EVERY = 500

# A worker whose resident memory passes this between two files drops the many files the jedi layer
# read, else what it keeps and then collects (JediInference.trim_memory, not again before it grows
# by TRIM_GROWTH): the largest process of a run stays near it, under the 600 MB a run on a million
# lines may take. A trim costs time (its collection walks the whole heap, and the next files load
# again what was dropped), so the limit is as high as that bound allows: measured in
# benchmarks/README.md#tuned-constants.
WORKER_MEMORY_LIMIT = 512 * 2 ** 20

_LOG_HANDLER = "torchlint-cli"  # the name of the handler show_log adds

# (root, interpreter, cache folder, budget): what a jedi layer is made for
LayerKey = Tuple[str, Optional[Interpreter], Optional[str], Optional[float]]


def peak_memory() -> Optional[int]:
    """This process's peak resident memory in bytes, or None where it cannot be read."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class ProcessState:
    """One process's share of a run.

    One jedi layer per project and interpreter, shared by every file this process checks:
    jedi's first trip into torch costs seconds, later ones milliseconds (None: jedi cannot run
    there). ``as_a_worker``: the collector runs only when :meth:`collect_now` says so."""

    def __init__(self, as_a_worker: bool = False) -> None:
        self.layers: Dict[LayerKey, Optional["JediInference"]] = {}
        self.said: Set[str] = set()  # warnings this process already printed
        self.as_a_worker = as_a_worker
        self.files = 0  # files checked as a worker (COLLECT_EVERY)
        self.peak = (peak_memory() or 0) if as_a_worker else 0  # at the last collection
        self.log_handler: Optional[logging.Handler] = None

    def say(self, message: str) -> None:
        if message not in self.said:
            self.said.add(message)
            print("torchlint: warning: %s" % message, file=sys.stderr, flush=True)

    def show_log(self, verbose: bool) -> None:
        """The core logs rule crashes; the CLI reports them itself, so show the log only with
        --verbose (a handler, even a null one, keeps Python's last-resort handler from printing it)."""
        logger = logging.getLogger("torchlint")
        for handler in [h for h in logger.handlers if h.get_name() == _LOG_HANDLER]:
            logger.removeHandler(handler)  # this state's, or (a forked worker) the parent's
        self.log_handler = logging.StreamHandler() if verbose else logging.NullHandler()
        self.log_handler.set_name(_LOG_HANDLER)
        logger.addHandler(self.log_handler)

    def close(self) -> None:
        """The run is over: its jedi interpreters end, its log handler goes."""
        self.close_layers()
        if self.log_handler is not None:
            logging.getLogger("torchlint").removeHandler(self.log_handler)
            self.log_handler = None

    # -- the jedi layers ------------------------------------------------------------------------

    def inference_for(self, job: "Job") -> Optional["JediInference"]:
        """The jedi layer for this job, or None (--no-infer, or jedi unusable: names alone then).
        After an interpreter timed out: torchlint's own interpreter, then names alone."""
        if not job.infer:
            return None
        key = (job.root, job.python, job.cache_dir, job.infer_budget)
        if key not in self.layers:
            self.layers[key] = self._new_layer(job, job.python)
        layer = self.layers[key]
        if layer is not None and layer.failure is not None:
            own = layer.interpreter.is_own
            self.layers[key] = layer = None if own else self._new_layer(job, own_interpreter())
        return layer

    def close_layers(self) -> None:
        """End this process's jedi interpreters before it forks workers: a child must never write
        to a pipe its parent (or a sibling) reads. A later question here starts them again."""
        for layer in self.layers.values():
            if layer is not None:
                layer.close()

    def _new_layer(self, job: "Job", interpreter: Optional[Interpreter]) -> Optional["JediInference"]:
        try:
            from ..inference.layer import JediInference
            from ..inference.inference_cache import InferenceCache
            own = interpreter is None or interpreter.is_own
            layer = JediInference(job.root, interpreter, on_timeout=lambda message: self.say(
                "%s; %s" % (message, "type inference is off for the rest of this run" if own
                            else "the next files are checked with torchlint's own Python")),
                cache=InferenceCache(Path(job.cache_dir)) if job.cache_dir else None, budget=job.infer_budget,
                # A CLI process ends after its files: jedi's warm-up state lives until then, and the
                # files, read from disk, do not change while their questions are asked.
                freeze_after_warm=True, share_states=True)
        except Exception as err:  # no jedi, or an environment it cannot start: fall back, never fail
            logging.getLogger("torchlint").warning("type inference is off: %s", err)
            return None
        for warning in layer.warnings:
            self.say(warning)
        return layer

    # -- the garbage collector ------------------------------------------------------------------

    def collect_now(self) -> None:
        """After each file a worker checked, or the main process when it checks many
        (:meth:`collected_as_a_worker`; see COLLECT_AFTER_GROWTH, WORKER_MEMORY_LIMIT)."""
        if not self.as_a_worker:
            return  # the main process: Python's own schedule
        self.files += 1
        layers = [layer for layer in self.layers.values() if layer is not None]
        trimmed = False
        for layer in layers:
            trimmed = layer.trim_memory(WORKER_MEMORY_LIMIT) or trimmed
        peak = peak_memory()
        if trimmed or not layers and (peak is None and self.files % COLLECT_EVERY == 0
                                      or peak is not None and peak - self.peak >= COLLECT_AFTER_GROWTH):
            collection.collect_everything()
            self.peak = peak_memory() or 0
        collection.freeze()

    @contextlib.contextmanager
    def collected_as_a_worker(self) -> Generator[None, None, None]:
        """Many files checked in this process (one CPU, or no process support): collect as a worker
        does (:meth:`collect_now`), memory limit included. On Python's own schedule each collection
        walks jedi's model of torch again, and the process grew past WORKER_MEMORY_LIMIT with
        nothing to trim it (benchmarks/README.md#tuned-constants)."""
        if self.as_a_worker:
            yield  # a worker already does
            return
        self.as_a_worker, self.peak = True, peak_memory() or 0
        try:
            with collection.paused():
                yield
        finally:
            self.as_a_worker = False


