"""The server's inferenceCache and inferBudget settings (declared in torchlint.settings): they
reach the jedi layers, running ones included, and with the cache off nothing is written to the
cache folder, nor to jedi's (parso's pickles); the server trims that folder as it writes."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from lsp_helpers import HELPER_MADE, SERVER_COMMAND, SERVER_ENV, VSCODE, codes, initialize, new_uri, \
    open_document, wait_for

from torchlint.inference import layer as inference_module
from torchlint.environments import own_interpreter
from torchlint.inference.inference_cache import CacheEvents, Entry
from torchlint.lsp import inference_layers
from torchlint.lsp.inference_layers import InferenceLayers, SwitchableCache
from torchlint.settings import DEFAULT_SETTINGS, Settings


def entries(cache_dir: Path):
    return sorted(cache_dir.rglob("*.json"))


# -- through the protocol ---------------------------------------------------------------------
@pytest.mark.asyncio(loop_scope="function")
async def test_with_the_cache_off_the_server_writes_nothing_and_on_again_it_writes(tmp_path):
    cache_dir, user_cache = tmp_path / "cache", tmp_path / "xdg"  # jedi's folder: $XDG_CACHE_HOME/jedi
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=dict(
        SERVER_ENV, TORCHLINT_CACHE_DIR=str(cache_dir), XDG_CACHE_HOME=str(user_cache)))
    client = await config.start()
    try:
        await initialize(client, VSCODE, initialization_options={"inferenceCache": False, "inferBudget": 2.5})

        async def jedi_wave(uri: str) -> None:
            """Open HELPER_MADE at ``uri`` and wait for the jedi wave (only it finds TL101)."""
            open_document(client, uri, HELPER_MADE)
            await wait_for(lambda: any(p.uri == uri and codes(p.diagnostics) == ["TL101"] for p in client.publishes),
                           timeout=240, what="the jedi wave of %s" % uri)

        def logged(text: str) -> bool:
            return any(text in m.message for m in client.log_messages)

        await jedi_wave(new_uri(tmp_path))
        assert logged("answers not kept on disk (inferenceCache off)") and logged("at most 2.5 s of jedi per file")
        assert entries(cache_dir) == [], "the cache is off, yet the server wrote to %s" % cache_dir
        assert not (user_cache / "jedi").exists(), "the cache is off, yet parso's pickles were kept on disk"

        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"torchlint": {"inferenceCache": True, "inferBudget": 0}}))
        await wait_for(lambda: logged("answers kept on disk in %s" % cache_dir), what="the settings taken")
        assert logged("no time limit per file (inferBudget 0)")
        await jedi_wave(new_uri(tmp_path))  # another path: its answers are not in memory yet
        assert entries(cache_dir), "the cache is on again, yet the server wrote nothing to %s" % cache_dir
        await client.shutdown_session()
    finally:
        await client.stop()


# -- the layers themselves --------------------------------------------------------------------
class FakeJedi:
    """Stands for JediInference: what the layers hand it, without starting jedi."""

    def __init__(self, root, interpreter, on_timeout=None, cache=None, budget=None, freeze_after_warm=False):
        self.root, self.interpreter, self.cache, self.budget = root, interpreter, cache, budget
        self.freeze_after_warm = freeze_after_warm
        self.warnings, self.failure, self.notes = [], None, {}

    def describe(self) -> str:
        return "fake jedi"

    def warm(self) -> None:
        pass

    def take_notes(self):
        notes, self.notes = self.notes, {}
        return notes

    def take_cache_events(self):
        return CacheEvents()


@pytest.fixture
def layers(monkeypatch, tmp_path):
    monkeypatch.setattr(inference_module, "JediInference", FakeJedi)
    # The warm-up freezes the GC and raises its thresholds: keep that out of the test process.
    monkeypatch.setattr(InferenceLayers, "_warm", lambda self, layer: None)
    monkeypatch.setenv("TORCHLINT_CACHE_DIR", str(tmp_path / "cache"))
    said = []
    layers = InferenceLayers(said.append)
    layers.said = said
    return layers


def test_the_settings_reach_new_and_running_layers(layers, tmp_path):
    running = layers.layer(str(tmp_path), own_interpreter())
    assert running.budget == DEFAULT_SETTINGS.infer_budget == 10.0
    assert running.freeze_after_warm  # a long-lived process: jedi's warm-up state is set aside
    assert isinstance(running.cache, SwitchableCache)
    assert "at most 10 s of jedi per file" in layers.said[-1]

    layers.configure(Settings(infer_budget=2.5, inference_cache=False))
    assert running.budget == 2.5
    assert "answers not kept on disk" in layers.said[-1] and "at most 2.5 s" in layers.said[-1]
    later = layers.layer(str(tmp_path / "other"), own_interpreter())
    assert later.budget == 2.5 and later is not running

    layers.configure(Settings(infer_budget=0))  # 0 is no limit: JediInference's None
    assert running.budget is None and later.budget is None
    count = len(layers.said)
    layers.configure(Settings(infer_budget=0, code_lens=False))  # nothing of theirs changed: nothing said
    assert len(layers.said) == count


def test_a_file_cut_short_by_the_budget_is_logged_once(layers, tmp_path):
    layer = layers.layer(str(tmp_path), own_interpreter())
    layer.notes["/p/big.py"] = "type inference stopped after 2.5 s"
    assert layers.layer(str(tmp_path), own_interpreter()) is layer
    assert layers.said[-1] == "torchlint: /p/big.py: type inference stopped after 2.5 s (inferBudget)"
    count = len(layers.said)
    layer.notes["/p/big.py"] = "type inference stopped after 2.5 s"  # the next check of the same file
    layers.layer(str(tmp_path), own_interpreter())
    assert len(layers.said) == count


def test_the_cache_switch_holds_for_a_layer_made_before_it(layers, tmp_path):
    cache = layers.layer(str(tmp_path), own_interpreter()).cache
    key = cache.key("environment", str(tmp_path / "m.py"), "x = 1\n")
    cache.store(key, Entry({"b:1:0": True}), [])
    assert cache.load(key) == Entry({"b:1:0": True})

    layers.configure(Settings(inference_cache=False))
    assert cache.load(key) is None  # stored, but not read while the setting is off
    other = cache.key("environment", str(tmp_path / "m.py"), "x = 2\n")
    cache.store(other, Entry({"b:1:0": False}), [])
    layers.configure(Settings(inference_cache=True))
    assert cache.load(other) is None, "written while the cache was off"
    assert cache.load(key) == Entry({"b:1:0": True})


def test_the_server_trims_the_cache_folder_as_it_writes(monkeypatch, tmp_path):
    monkeypatch.setattr(inference_layers, "TRIM_EVERY", 4)
    cache = SwitchableCache(tmp_path / "cache", lambda: True)
    cache.max_bytes = 1  # every entry is over the bound: a trim leaves none
    for n in range(3):
        cache.store(cache.key("environment", "m.py", "x = %d\n" % n), Entry({"b:1:0": True}), [])
    assert len(entries(tmp_path / "cache")) == 3
    cache.store(cache.key("environment", "m.py", "x = 3\n"), Entry({"b:1:0": True}), [])
    assert entries(tmp_path / "cache") == []


def test_the_command_line_takes_its_budget_default_from_the_settings():
    from torchlint.cli import Job, build_parser
    from torchlint.engine import CheckOptions
    from torchlint.settings import given_flags, merged
    check = next(a for a in build_parser()._actions if a.dest == "command").choices["check"]
    given = merged([given_flags(check.parse_args([]), "check")])
    assert given.infer_budget == DEFAULT_SETTINGS.infer_budget
    assert Job(path="", display="", options=CheckOptions()).infer_budget == DEFAULT_SETTINGS.infer_budget
    assert merged([given_flags(check.parse_args(["--no-cache"]), "check")]).inference_cache is False


# -- memory -----------------------------------------------------------------------------------
def test_jedis_parse_of_a_closed_document_is_dropped_before_the_next_check(layers, tmp_path):
    import jedi
    from parso.cache import parser_cache

    def parsed(path: Path) -> bool:
        return any(path in by_path for by_path in parser_cache.values())

    closed, still_open = tmp_path / "closed.py", tmp_path / "open.py"
    for path in (closed, still_open):  # parsed as the jedi layer does: code and path, parso's cache kept
        jedi.Script(code=HELPER_MADE, path=str(path), environment=jedi.InterpreterEnvironment()).get_names()
    assert parsed(closed) and parsed(still_open)
    layers.forget(str(closed))
    assert parsed(closed), "dropped at once: a check under way in another thread may be using it"
    layers.layer(str(tmp_path), own_interpreter())  # the next check
    assert not parsed(closed) and parsed(still_open)
    layers.forget(str(still_open))
    layers.layer(str(tmp_path), own_interpreter())
    assert not parsed(still_open)


def test_jedis_parse_of_a_closed_document_is_freed_as_it_is_dropped(layers, tmp_path):
    """Not left to the full collection (seconds, with many large files closed): the parse is one
    cycle through parso's parent links, unlinked as it is dropped."""
    import jedi
    from parso.cache import parser_cache
    from parso.tree import BaseNode, Leaf
    from torchlint import collection

    closed = tmp_path / "closed.py"
    jedi.Script(code=HELPER_MADE * 20, path=str(closed), environment=jedi.InterpreterEnvironment()).get_names()
    nodes, tree = [], [next(by_path[closed].node for by_path in parser_cache.values() if closed in by_path)]
    while tree:
        node = tree.pop()
        nodes.append(id(node))
        tree.extend(getattr(node, "children", ()))
    del node
    parsed = set(nodes)
    gc.collect()  # the script's own garbage, as the server collects after each jedi wave: parso's cache holds the tree
    assert len(parsed) > 1000
    with collection.paused():  # no collection meanwhile: what goes, goes by its references
        layers.forget(str(closed))
        layers.layer(str(tmp_path), own_interpreter())  # the next check drops it
        left = sum(isinstance(o, (BaseNode, Leaf)) and id(o) in parsed for o in gc.get_objects())
    assert left == 0, "%d of the closed document's %d nodes wait for a collection" % (left, len(parsed))


def test_the_recent_trees_are_bounded_by_the_size_of_their_texts():
    """Every version of a file being edited is parsed once (the jedi wave reads the whole text):
    the trees kept for reuse are bounded by their texts' size, not only by their number."""
    from torchlint.analysis import parsing
    body = "x = 1\n" * 20_000  # 120,000 characters: a tree of 60,000 nodes
    versions = [body + "y = %d\n" % n for n in range(6)]
    for text in versions:
        parsing.parse(text, "/project/big.py")
    kept = [text for _, text in parsing._RECENT_TREES]
    assert sum(map(len, kept)) <= parsing._RECENT_CHARS
    assert kept[-1] == versions[-1] and versions[-2] in kept  # the waves of the current version, the one before
    assert parsing.parse(versions[-1], "/project/big.py") is parsing.parse(versions[-1], "/project/big.py")

    huge = "x = 1\n" * (parsing._RECENT_CHARS // 5)  # larger than the bound on its own: still kept
    assert parsing.parse(huge, "/project/huge.py") is parsing.parse(huge, "/project/huge.py")
    assert [text for _, text in parsing._RECENT_TREES] == [huge]
