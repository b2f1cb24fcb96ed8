"""Many files checked in worker processes, few in this one (``run_jobs``)."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Dict, Generator, List, Optional, Sequence, Tuple, cast

from .. import collection, processes
from .checking import Checked, Job, check_file
from .process_state import ProcessState
from .progress import Progress

PARALLEL_MIN_FILES = 16
# The most files of one folder a worker is given at once (see run_jobs; benchmarks/README.md#tuned-constants).
BATCH_FILES = 8


def run_jobs(jobs: Sequence[Job], state: ProcessState, verbose: bool = False,
             progress: Optional[Progress] = None) -> Generator[Checked, None, None]:
    """Check many files in worker processes, few in this one (``state`` is this process's);
    results in the jobs' order, as they come. Close the iterator (``contextlib.closing``) to stop
    early: the workers are killed. ``progress`` is told of each file as soon as it is done,
    whatever its place in the order."""
    cpus = os.cpu_count() or 1
    done = 0
    if len(jobs) >= PARALLEL_MIN_FILES and cpus > 1:
        pool = None
        finished = False
        try:
            state.close_layers()  # nothing of jedi's may cross the fork
            pool = ProcessPoolExecutor(max_workers=min(cpus, 32), initializer=start_worker,
                                       initargs=(verbose, os.getpid()))
            for checked in _in_the_pool(pool, jobs, progress):
                done += 1
                yield checked
            finished = True
        except (OSError, BrokenProcessPool):  # no process support here: check the rest serially
            pass
        finally:
            if pool is not None:
                if finished:
                    pool.shutdown(wait=True)
                else:
                    stop_pool(pool)
    with state.collected_as_a_worker() if len(jobs) - done >= PARALLEL_MIN_FILES else contextlib.nullcontext():
        for job in jobs[done:]:
            checked = check_file(job, state)
            if progress is not None:
                progress.file_done()
            yield checked


def _in_the_pool(pool: ProcessPoolExecutor, jobs: Sequence[Job],
                 progress: Optional[Progress]) -> Generator[Checked, None, None]:
    """A few files of one folder per task, all queued at once: a worker takes the next batch the
    moment it is free. Files of one folder import the same modules, which the jedi layer then
    reads once for all of them (a worker keeps a few dozen; files handed out one by one in any
    order made each read them again: benchmarks/README.md#tuned-constants). Largest
    batches first: a big one started last would keep one worker busy while the others have
    nothing left. Not pool.map: on an interrupt it cancels what is pending, which the pool's own
    thread then trips over when the workers are killed."""
    # each job's batch and its place there
    placed: List[Tuple[Optional[Future[List[Checked]]], int]] = [(None, 0)] * len(jobs)
    for batch in _batches(jobs):
        future = pool.submit(check_files, [jobs[index] for index in batch])
        if progress is not None:
            for _ in batch:
                future.add_done_callback(progress.file_done)
        for place, index in enumerate(batch):
            placed[index] = (future, place)
    for future_of_batch, place in placed:
        yield cast("Future[List[Checked]]", future_of_batch).result()[place]  # (all submitted above)


def _batches(jobs: Sequence[Job]) -> List[List[int]]:
    """The jobs' indices in batches: files of one folder, in the jobs' order, at most BATCH_FILES
    per batch; the batches with the most bytes first."""
    by_folder: Dict[str, List[int]] = {}
    for index, job in enumerate(jobs):
        by_folder.setdefault(os.path.dirname(os.path.abspath(job.path)), []).append(index)
    batches = [indices[start:start + BATCH_FILES] for indices in by_folder.values()
               for start in range(0, len(indices), BATCH_FILES)]
    return sorted(batches, key=lambda batch: -sum(_size(jobs[index].path) for index in batch))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # reported when its worker reads it


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the workers now rather than wait for the files they are on (the main process writes
    every fixed file: a worker ended midway leaves nothing half done)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    processes.end_workers(workers)
    pool.shutdown(wait=False)
    if manager is not None:
        manager.join(timeout=10)  # it marks the unfinished work as failed, then ends


# -- in a worker ------------------------------------------------------------------------------------

# The worker's ProcessState, made by start_worker (the pool's initializer) for the tasks the pool
# then hands this process (check_files): the one thing a worker keeps at module level, because a
# task reaches its process's state no other way. None in the main process, which passes its own.
_worker: Optional[ProcessState] = None


def check_files(jobs: List[Job]) -> List[Checked]:
    """A worker's task: a batch of files, checked in order."""
    if _worker is None:
        raise RuntimeError("check_files runs in a worker that start_worker began")
    return [check_file(job, _worker) for job in jobs]


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def start_worker(verbose: bool, main_pid: int) -> None:
    """Pool initializer: this process's state, logging like the main process; leave Ctrl-C to
    it, and die with it. Its garbage collector runs only when ProcessState.collect_now says so."""
    global _worker
    _worker = ProcessState(as_a_worker=True)
    _worker.show_log(verbose)
    collection.stop_automatic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process stops the pool itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the main process's handler (a fork inherits it): end at once
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent went before the line above took effect
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="torchlint-parent-watch",
                     daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    """Where PR_SET_PDEATHSIG is unavailable: look for the parent every half second."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
