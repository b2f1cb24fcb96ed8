"""Messages to the user: the log (``window/logMessage``, and stderr) for everything, and
``window/showMessage`` for what they must act on (configuration, environment, a document too
large or out of sync), shown once per problem until it changes or goes away.

Analysis threads log too: frames are written from the event loop only, so a message from
another thread is handed to the loop (:attr:`Messages.loop`, set at ``initialize``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Dict, Hashable, Optional

from lsprotocol import types

log = logging.getLogger("torchlint.lsp")

Problems = Dict[Hashable, str]  # key -> the message shown for it


class Messages:
    def __init__(self, send_log: Callable[[types.LogMessageParams], None],
                 send_show: Callable[[types.ShowMessageParams], None]):
        self._send_log = send_log  # window/logMessage
        self._send_show = send_show  # window/showMessage
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # the server's, once initialized
        self.problems: Problems = {}  # problems of no one document (documents keep theirs in their record)

    def _on_loop(self) -> bool:
        try:
            asyncio.get_running_loop()
            return True
        except RuntimeError:  # an executor thread
            return False

    def log(self, message: str, kind: types.MessageType) -> None:
        """Log to stderr and to the client. Any thread."""
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, "%s", message)
        params = types.LogMessageParams(type=kind, message=message)
        if self._on_loop():
            self._log(params)
        elif self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self._log, params)
            except RuntimeError:  # the loop closed (the server is exiting): stderr has it
                pass

    def _log(self, params: types.LogMessageParams) -> None:
        try:
            self._send_log(params)
        except Exception:  # no connection (yet): stderr has it
            pass

    def log_error(self, message: str) -> None:
        self.log(message, types.MessageType.Error)

    def show(self, message: str, kind: types.MessageType) -> None:
        """Logged, and shown in the editor. On the event loop."""
        self.log(message, kind)
        try:
            self._send_show(types.ShowMessageParams(type=kind, message=message))
        except Exception:  # no connection (yet): the log has it
            pass

    def notify_problem(self, key: Hashable, text: str, kind: types.MessageType = types.MessageType.Warning,
                       shown: Optional[Problems] = None) -> None:
        """Show the user a problem they can act on, once: again only when ``text`` changes for
        the same ``key`` (or after ``clear_problem(key)``). ``shown``: where that is remembered,
        a document's record for a problem of that document (gone when it closes). Any thread."""
        if not self._on_loop():
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self.notify_problem, key, text, kind, shown)
            else:
                log.warning("%s", text)
            return
        shown = self.problems if shown is None else shown
        if shown.get(key) == text:
            return
        shown[key] = text
        self.show(text, kind)

    def clear_problem(self, key: Hashable, shown: Optional[Problems] = None) -> None:
        """The problem is gone: show it again if it comes back. Any thread."""
        (self.problems if shown is None else shown).pop(key, None)

    def config_problem(self, message: str) -> None:
        """A pyproject.toml the settings cannot be read from (reported by the resolver)."""
        self.notify_problem(("config", message), "torchlint: %s" % message, types.MessageType.Error)

    def warn_once(self, message: str) -> None:
        """A warning the user must see (an environment problem): shown once per text."""
        self.notify_problem(("warning", message), message, types.MessageType.Warning)
