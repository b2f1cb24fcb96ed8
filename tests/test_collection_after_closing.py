"""The collection after closing documents (torchlint.collection, issue 49): what jedi's warm-up
froze is thawed only when the server says so (no document open); otherwise the collection walks
only what is not frozen, and a pause never walks jedi's warm state while documents are open."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

from torchlint import collection


class Cycle:
    def __init__(self) -> None:
        self.me = self


def frozen_cycles(count: int):
    """``count`` cycles made garbage after being frozen (as the warm-up freezes what is alive)."""
    cycles = [Cycle() for _ in range(count)]
    refs = [weakref.ref(c) for c in cycles]
    gc.freeze()
    del cycles
    return refs


def alive(refs) -> int:
    return sum(ref() is not None for ref in refs)


def collect_after_closing(thaw: bool):
    done = threading.Event()
    collector = collection.CollectionAfterClosing(lambda: None, lambda freed, seconds: done.set(), quiet=0.01,
                                                  thaw=lambda: thaw)
    collector.closed()
    assert done.wait(30), "no collection after closing"
    return collector.collections


@pytest.fixture
def no_frozen_objects_after():
    yield
    gc.unfreeze()  # the rest of the suite runs with nothing frozen


@pytest.mark.parametrize("thaw", [False, True])
def test_frozen_garbage_goes_only_when_the_collection_thaws(no_frozen_objects_after, thaw):
    refs = frozen_cycles(100)
    assert alive(refs) == 100
    collected = collect_after_closing(thaw)
    assert len(collected) == 1
    assert alive(refs) == (0 if thaw else 100)
    # Frozen again after a thaw (jedi's warm state stays out of young collections), as before.
    assert gc.get_freeze_count() > 0
