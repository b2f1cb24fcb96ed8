"""The jedi layer for the server's second wave: one per project root and interpreter.

jedi is not thread-safe, so every use goes through one lock; its first trip into torch
costs seconds, so each layer is warmed in the background as soon as it is known.
Which interpreter: :func:`torchlint.analysis.environments.choose_interpreter` (the
editor's ``interpreter`` setting, ``TORCHLINT_PYTHON``, a repository-named one only as
far as the trust rule allows...). A layer whose interpreter timed out is replaced by a
fresh one (torchlint's own interpreter when the chosen one hung); after a second
timeout the project is checked with names only.
"""
from __future__ import annotations

import gc
import logging
import threading
from typing import Callable, Dict, Optional, Tuple

from ..analysis.environments import SERVER_HINT, Choice, Interpreter, choose_interpreter, own_interpreter
from ..analysis.inference_cache import InferenceCache, default_cache_dir

log = logging.getLogger("torchlint.lsp")

JEDI_WAVE = "jedi"  # the scheduler's name for the second wave
INTERPRETER_SETTING = "the torchlint interpreter setting"
_MISSING = object()


class InferenceLayers:
    def __init__(self, report: Callable[[str], None], warn: Optional[Callable[[str], None]] = None):
        self.lock = threading.Lock()  # jedi's state is shared by every file of a process
        self._layers: Dict[Tuple[str, Interpreter], object] = {}
        self._choices: Dict[tuple, Choice] = {}
        self._timeouts: Dict[Tuple[str, Interpreter], int] = {}
        self._report = report  # tells the user once per layer what inference runs with (log)
        self._warn = warn or report  # what the user must see once (window/showMessage)
        self._warned: set = set()

    def choose(self, explicit: Optional[str], configured: Optional[str], config_file, trust: bool) -> Interpreter:
        """The interpreter for a project (cached per arguments); says once what was passed over."""
        key = (explicit, configured, str(config_file), trust)
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = choose_interpreter(
                explicit=explicit, explicit_source=INTERPRETER_SETTING, configured=configured,
                config_file=config_file, trust_workspace=trust, hint=SERVER_HINT)
        for warning in choice.warnings:
            self.warn_once("torchlint: %s" % warning)
        return choice.interpreter

    def warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self._warn(message)

    def layer(self, root: str, interpreter: Interpreter):
        """The JediInference for a project, or None when jedi cannot run there (names only then)."""
        key = (root, interpreter)
        with self.lock:
            layer = self._layers.get(key, _MISSING)
            if layer is _MISSING:
                layer = self._layers[key] = self._create(root, interpreter)
            elif layer is not None and layer.failure is not None:
                layer = self._layers[key] = self._recover(key, layer)
            return layer

    def _recover(self, key, failed):
        """A fresh layer after a timeout; names only after the second one."""
        root = key[0]
        count = self._timeouts[key] = self._timeouts.get(key, 0) + 1
        if count > 1:
            self.warn_once("torchlint: %s again: type inference is off for %s for this session"
                           % (failed.failure, root))
            return None
        interpreter = failed.interpreter if failed.interpreter.is_own else own_interpreter()
        self.warn_once("torchlint: %s: type inference restarted with %s" % (failed.failure, interpreter.path))
        return self._create(root, interpreter)

    def _create(self, root: str, interpreter: Interpreter):
        try:
            from ..analysis.inference import JediInference
            # The CLI's answers on disk (same folder, same keys): a restart asks jedi nothing new.
            layer = JediInference(root, interpreter, on_timeout=lambda message: log.warning("%s", message),
                                  cache=InferenceCache(default_cache_dir()))
        except Exception as err:  # no jedi, a broken interpreter: the syntactic wave still stands
            self._report("type inference is off for %s: %s" % (root, err))
            return None
        for warning in layer.warnings:
            self.warn_once("torchlint: %s" % warning)
        self._report("torchlint: %s" % layer.describe())
        threading.Thread(target=self._warm, args=(layer,), name="torchlint-jedi-warm", daemon=True).start()
        return layer

    def _warm(self, layer) -> None:
        with self.lock:
            layer.warm()
            # jedi now holds ~1M long-lived objects: keep full GC passes (hundreds of ms each,
            # mid-keystroke) from walking them again and again.
            gc.collect()
            gc.freeze()
            gc.set_threshold(50_000, 20, 100)
