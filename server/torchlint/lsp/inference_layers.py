"""The jedi layer for the server's second wave: one per project root and interpreter.

jedi is not thread-safe, so every use goes through one lock; its first trip into torch
costs seconds, so each layer is warmed in the background as soon as it is known.
Which interpreter: :func:`torchlint.environments.choose_interpreter` (the
editor's ``interpreter`` setting, ``TORCHLINT_PYTHON``, a repository-named one only as
far as the trust rule allows...). A layer whose interpreter timed out is replaced by a
fresh one (torchlint's own interpreter when the chosen one hung); after a second
timeout the project is checked with names only.

Two settings shape every layer (:meth:`InferenceLayers.configure`): ``inferenceCache``, whether
jedi's answers are read from and written to the disk cache the command line uses, and
``inferBudget``, the seconds of jedi per file and check. A change reaches the layers already
running at once (turning the cache off also stops a check under way from writing), without
starting jedi again.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional, Set, Tuple

from .. import collection
from ..environments import SERVER_HINT, Choice, Interpreter, choose_interpreter, own_interpreter
from ..inference.inference_cache import Dependency, Entry, InferenceCache, default_cache_dir
from ..settings import DEFAULT_SETTINGS, Settings

if TYPE_CHECKING:  # imported when a layer is made: the server runs without jedi too
    from ..inference.layer import JediInference

log = logging.getLogger("torchlint.lsp")

INTERPRETER_SETTING = "the torchlint interpreter setting"
_MISSING: Any = object()  # (Any: compared with layers, never used as one)
TRIM_EVERY = 500  # entries written between two trims of the cache folder (the server runs for days)


class SwitchableCache(InferenceCache):
    """The disk caches as the ``inferenceCache`` setting has them at each moment: off, nothing is
    read or written (parso's pickles neither: JediInference), even by a check that started
    before the switch. Every TRIM_EVERY entries
    it writes, the folder is trimmed to its bound (the command line trims after each run)."""

    def __init__(self, directory: Path, enabled: Callable[[], bool]) -> None:
        super().__init__(directory)
        self._enabled = enabled
        self._stored = 0

    def enabled(self) -> bool:
        return self._enabled()

    def load(self, key: str) -> Optional[Entry]:
        return super().load(key) if self._enabled() else None

    def store(self, key: str, entry: Entry, dependencies: Iterable[Dependency]) -> None:
        if not self._enabled():
            return
        super().store(key, entry, dependencies)
        self._stored += 1
        if self._stored % TRIM_EVERY == 0:
            self.trim()


def budget_seconds(settings: Settings) -> Optional[float]:
    """The per-file budget a layer takes (None: no limit, which the setting says as 0)."""
    return settings.infer_budget or None


class InferenceLayers:
    def __init__(self, report: Callable[[str], None], warn: Optional[Callable[[str], None]] = None) -> None:
        self.lock = threading.Lock()  # jedi's state is shared by every file of a process
        self._layers: Dict[Tuple[str, Interpreter], Optional[JediInference]] = {}
        # (explicit, configured, config file, trust) -> the interpreter chosen
        self._choices: Dict[Tuple[Optional[str], Optional[str], str, bool, str], Choice] = {}
        self._timeouts: Dict[Tuple[str, Interpreter], int] = {}
        self._report = report  # tells the user once per layer what inference runs with (log)
        self._warn = warn or report  # what the user must see once (window/showMessage)
        self._warned: Set[str] = set()
        self._noted: Set[str] = set()  # files whose inference the budget cut short, and cache failures: said once each
        self._closed: Set[str] = set()  # documents closed since the last check (see forget)
        self._use_cache = DEFAULT_SETTINGS.inference_cache
        self._budget = budget_seconds(DEFAULT_SETTINGS)

    def configure(self, settings: Settings) -> None:
        """Take the inferenceCache and inferBudget settings, for the layers running and to come
        (said in the log when they change). Never waits for the lock: a check under way reads
        the budget before each question."""
        chosen = (settings.inference_cache, budget_seconds(settings))
        if chosen == (self._use_cache, self._budget):
            return
        self._use_cache, self._budget = chosen
        for layer in list(self._layers.values()):
            if layer is not None:
                layer.budget = self._budget
        self._report("torchlint: type inference: %s" % self.describe_settings())

    def describe_settings(self) -> str:
        where = ("answers kept on disk in %s" % default_cache_dir() if self._use_cache
                 else "answers not kept on disk (inferenceCache off)")
        budget = ("at most %g s of jedi per file" % self._budget if self._budget is not None
                  else "no time limit per file (inferBudget 0)")
        return "%s; %s" % (where, budget)

    def choose(self, explicit: Optional[str], configured: Optional[str], config_file: Optional[Path],
               trust: bool, explicit_source: str = "") -> Interpreter:
        """The interpreter for a project (cached per arguments); says once what was passed over.
        ``explicit_source``: who chose ``explicit``, as the editor names it (the setting, when empty)."""
        key = (explicit, configured, str(config_file), trust, explicit_source)
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = choose_interpreter(
                explicit=explicit, explicit_source=explicit_source or INTERPRETER_SETTING, configured=configured,
                config_file=config_file, trust_workspace=trust, hint=SERVER_HINT)
        for warning in choice.warnings:
            self.warn_once("torchlint: %s" % warning)
        return choice.interpreter

    def warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self._warn(message)

    def layer(self, root: str, interpreter: Interpreter) -> Optional[JediInference]:
        """The JediInference for a project, or None when jedi cannot run there (names only then)."""
        key = (root, interpreter)
        with self.lock:
            layer: Optional[JediInference] = self._layers.get(key, _MISSING)
            if layer is _MISSING:
                layer = self._layers[key] = self._create(root, interpreter)
            elif layer is not None and layer.failure is not None:
                layer = self._layers[key] = self._recover(key, layer)
            if layer is not None:
                self._say_notes(layer)
            self._drop_closed()
            return layer

    def checks_reading(self, path: str) -> Set[str]:
        """The paths of the checked files whose answers may change now that ``path`` was saved
        (ProjectFiles.checks_reading), in every layer. Never waits for the lock: a check under
        way is checked again anyway."""
        found: Set[str] = set()
        for layer in list(self._layers.values()):
            if layer is not None:
                found |= layer.checks_reading(path)
        return found

    def forget(self, path: Optional[str]) -> None:
        """A document was closed: jedi's parse of its last text (parso keeps one per file) is
        dropped before the next check, while no thread uses jedi. Any thread."""
        if path:
            self._closed.add(path)

    def release_closed(self) -> None:
        """Drop jedi's parses of the documents closed since the last check now, not at the next
        check (which may be long in coming): before the collection after closing. Waits for the
        check under way; one document at a time, so that a check waiting goes in between (60
        large files took seconds)."""
        while self._closed:
            with self.lock:
                self._drop_closed(at_most=1)

    def _drop_closed(self, at_most: int = -1) -> None:
        """Under the lock. A closed file that another one imports is parsed again from disk."""
        if not self._closed:
            return
        try:
            from ..inference import jedi_access  # with jedi
        except ImportError:  # no jedi: nothing was parsed
            self._closed.clear()
            return
        while self._closed and at_most:
            jedi_access.drop_closed_tree(self._closed.pop())
            at_most -= 1

    def _say_notes(self, layer: JediInference) -> None:
        """Log, once per file, that the budget cut its inference short (in a check before this one),
        and once per session why a disk cache cannot be written."""
        for path, note in layer.take_notes().items():
            if path not in self._noted:
                self._noted.add(path)
                self._report("torchlint: %s: %s (inferBudget)" % (path, note))
        for unwritten in layer.take_cache_events().unwritten:
            if unwritten not in self._noted:
                self._noted.add(unwritten)
                self._report("torchlint: %s; the findings are the same, checks are slower" % unwritten)

    def _recover(self, key: Tuple[str, Interpreter], failed: JediInference) -> Optional[JediInference]:
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

    def _create(self, root: str, interpreter: Interpreter) -> Optional[JediInference]:
        try:
            from ..inference.layer import JediInference
            # The CLI's answers on disk (same folder, same keys): a restart asks jedi nothing new.
            layer = JediInference(root, interpreter, on_timeout=lambda message: log.warning("%s", message),
                                  cache=SwitchableCache(default_cache_dir(), lambda: self._use_cache),
                                  budget=self._budget, freeze_after_warm=True)
        except Exception as err:  # no jedi, a broken interpreter: the syntactic wave still stands
            self._report("type inference is off for %s: %s" % (root, err))
            return None
        for warning in layer.warnings:
            self.warn_once("torchlint: %s" % warning)
        self._report("torchlint: %s; %s" % (layer.describe(), self.describe_settings()))
        threading.Thread(target=self._warm, args=(layer,), name="torchlint-jedi-warm", daemon=True).start()
        return layer

    def _warm(self, layer: JediInference) -> None:
        with self.lock:
            layer.warm()  # which sets jedi's long-lived state aside from collections (freeze_after_warm)
            collection.fewer_young_collections()
