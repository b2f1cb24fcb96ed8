"""The progress line a run draws on a terminal."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import Future
from typing import Any, Iterator, Mapping, Optional, TextIO

PROGRESS_AFTER = 2.0  # seconds: shorter runs show no progress line


class Progress:
    """``torchlint: 120/471 files, 3.4 s`` on one line of a terminal's stderr, redrawn a few times a
    second once a run has taken ``PROGRESS_AFTER`` seconds, and wiped at the end. Only for a
    terminal outside CI (``CI`` unset); -q turns it off."""

    def __init__(self, total: int, stream: TextIO, started: Optional[float] = None, interval: float = 0.25) -> None:
        self.total = total
        self.stream = stream
        self.started = time.monotonic() if started is None else started
        self.interval = interval
        self.done = 0
        self._drawn = False
        self._lock = threading.Lock()  # one writer at a time: the drawing thread or a message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="torchlint-progress", daemon=True)

    @staticmethod
    def wanted(stream: TextIO, quiet: bool, environ: Optional[Mapping[str, str]] = None) -> bool:
        environ = os.environ if environ is None else environ
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            return False
        return tty and not quiet and not environ.get("CI")

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False

    @contextlib.contextmanager
    def cleared(self) -> Iterator[None]:
        """Print a message during the run: the line is wiped first and drawn again later."""
        with self._lock:
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            yield

    def file_done(self, _future: Optional["Future[Any]"] = None) -> None:
        self.done += 1  # one writer at a time: the pool's result thread, or the main thread

    def line(self) -> str:
        done = min(self.done, self.total)
        return "torchlint: %d/%d files, %.1f s" % (done, self.total, time.monotonic() - self.started)

    def _run(self) -> None:
        if self._stop.wait(max(0.0, PROGRESS_AFTER - (time.monotonic() - self.started))):
            return
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                self._write("\r" + self.line() + "\x1b[K")
                self._drawn = True
            if self._stop.wait(self.interval):
                return

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the run goes on without it
            self._stop.set()
