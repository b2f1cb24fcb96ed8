"""SIGINT and SIGTERM during ``torchlint check``: the run stops, cleaning up as for Ctrl-C."""
from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any, Callable, Dict, List, Optional, Type, Union


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanup runs as for Ctrl-C. Not an Exception:
    no ``except Exception`` (a rule's guard, a file's) may turn it into an internal error."""


Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


class StopSignals:
    """Within the block SIGTERM raises Terminated (by default the process just ends, skipping
    cleanup) and SIGINT raises KeyboardInterrupt, each also recorded for :meth:`stop_if_received`.
    A SIGINT that this process was started ignoring (a background job) stays ignored."""

    def __init__(self) -> None:
        self.received: List[int] = []  # the stopping signals received during this run
        self._previous: Dict[int, Handler] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in (signal.SIGTERM, signal.SIGINT):
            handler = signal.getsignal(signum)
            if handler is None or signum == signal.SIGINT and handler is not signal.default_int_handler:
                continue
            self._previous[signum] = signal.signal(signum, self._stop_on)
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        self.received.clear()

    def _stop_on(self, signum: int, frame: Optional[FrameType]) -> None:
        self.received.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def stop_if_received(self) -> None:
        """Raise again a stopping signal whose exception Python swallowed: one that landed in a
        ``__del__`` or a garbage-collector callback is printed as "ignored" and lost. Called before
        anything is written and between files, so a run signalled to stop never goes on."""
        if self.received:
            raise Terminated() if self.received[0] == signal.SIGTERM else KeyboardInterrupt()
