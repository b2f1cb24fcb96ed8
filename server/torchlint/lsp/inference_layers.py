"""The jedi layer for the server's second wave: one per project root and interpreter.

jedi is not thread-safe, so every use goes through one lock; its first trip into torch
costs seconds, so each layer is warmed in the background as soon as it is known.
"""
from __future__ import annotations

import gc
import logging
import threading
from typing import Callable, Dict, Optional, Tuple

log = logging.getLogger("torchlint.lsp")

JEDI_WAVE = "jedi"  # the scheduler's name for the second wave


class InferenceLayers:
    def __init__(self, report: Callable[[str], None]):
        self.lock = threading.Lock()  # jedi's state is shared by every file of a process
        self._layers: Dict[Tuple[str, Optional[str]], object] = {}
        self._report = report  # tells the user once per layer what inference runs with

    def layer(self, root: str, python: Optional[str]):
        """The JediInference for a project, or None when jedi cannot run there (names only then)."""
        key = (root, python)
        with self.lock:
            if key not in self._layers:
                self._layers[key] = self._create(root, python)
            return self._layers[key]

    def _create(self, root: str, python: Optional[str]):
        try:
            from ..analysis.inference import JediInference
            layer = JediInference(root, python)
        except Exception as err:  # no jedi, a broken interpreter: the syntactic wave still stands
            self._report("type inference is off for %s: %s" % (root, err))
            return None
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
