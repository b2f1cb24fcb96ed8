"""A class whose base is in another file: when that file is saved, the editor checks the subclass's
document again (its TL106 answer was read from the base's file), at its unchanged version."""
from __future__ import annotations

import pytest
from lsprotocol import types

from lsp_helpers import SERVER_ENV, codes, open_document, replace_text, serving, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="function")

WAVES_TIMEOUT = 240  # seconds for the jedi wave on a slow, loaded machine

TRUNK = """\
import torch.nn as nn


class Trunk(nn.Module):
    def embed(self, x):
        return self.body(x)
"""

NET = """\
import torch.nn as nn

from .trunk import Trunk


class Net(Trunk):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.spare = nn.Linear(4, 4)

    def forward(self, x):
        return self.embed(x)
"""

USING_SPARE = TRUNK.replace("return self.body(x)", "return self.body(x) + self.spare(x)")


def net_publishes(client, uri, since):
    return [codes(p.diagnostics) for p in client.publishes[since:] if p.uri == uri]


async def test_saving_the_base_checks_the_subclass_again(tmp_path):
    package = tmp_path / "zoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    trunk, net = package / "trunk.py", package / "net.py"
    trunk.write_text(TRUNK)
    net.write_text(NET)
    async with serving(tmp_path, dict(SERVER_ENV, TORCHLINT_CACHE_DIR=str(tmp_path / "cache"))) as client:
        open_document(client, net.as_uri(), NET)
        await wait_for(lambda: ["TL106"] in net_publishes(client, net.as_uri(), 0), timeout=WAVES_TIMEOUT,
                       what="the jedi wave's TL106 on net.py")
        open_document(client, trunk.as_uri(), TRUNK)
        for version, (before, after, found) in enumerate([(TRUNK, USING_SPARE, []), (USING_SPARE, TRUNK, ["TL106"])],
                                                         start=2):
            since = len(client.publishes)
            replace_text(client, trunk.as_uri(), before, after, version)
            trunk.write_text(after)
            client.text_document_did_save(types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=trunk.as_uri())))
            # Both waves of net.py again (the first, by names alone, knows no Module there).
            await wait_for(lambda: len(net_publishes(client, net.as_uri(), since)) >= 2, timeout=WAVES_TIMEOUT,
                           what="net.py checked again after trunk.py v%d was saved" % version)
            assert net_publishes(client, net.as_uri(), since)[-1] == found


SURGERY = """\
import torch.nn as nn


def replace_head(net, classes):
    net.fc = nn.Linear(512, classes)
"""

TRAIN = """\
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .surgery import replace_head


def finetune(model, loader, rank):
    ddp = DDP(model, device_ids=[rank])
    replace_head(model, 10)
    for x in loader:
        ddp(x).sum().backward()
"""

READING = SURGERY.replace("net.fc = nn.Linear(512, classes)", "print(net.fc.in_features, classes)")


async def test_saving_a_helper_checks_its_callers_again(tmp_path):
    # TL205 reads what replace_head does from surgery.py: saved, train.py is checked again.
    package = tmp_path / "zoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    surgery, train = package / "surgery.py", package / "train.py"
    surgery.write_text(SURGERY)
    train.write_text(TRAIN)
    async with serving(tmp_path, dict(SERVER_ENV, TORCHLINT_CACHE_DIR=str(tmp_path / "cache"))) as client:
        open_document(client, train.as_uri(), TRAIN)
        await wait_for(lambda: ["TL205"] in net_publishes(client, train.as_uri(), 0), timeout=WAVES_TIMEOUT,
                       what="the jedi wave's TL205 on train.py")
        open_document(client, surgery.as_uri(), SURGERY)
        for version, (before, after, found) in enumerate([(SURGERY, READING, []), (READING, SURGERY, ["TL205"])],
                                                         start=2):
            since = len(client.publishes)
            replace_text(client, surgery.as_uri(), before, after, version)
            surgery.write_text(after)
            client.text_document_did_save(types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=surgery.as_uri())))
            await wait_for(lambda: len(net_publishes(client, train.as_uri(), since)) >= 2, timeout=WAVES_TIMEOUT,
                           what="train.py checked again after surgery.py v%d was saved" % version)
            assert net_publishes(client, train.as_uri(), since)[-1] == found
