"""Registration status at a glance: what `self.<name>` is in a Module class (the core's answer,
and the hover that shows it; a flagged range keeps the finding's card)."""
from __future__ import annotations

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import new_uri, open_document, wait_for_publish
from torchlint.analysis.context import FileContext
from torchlint.analysis.parsing import parse
from torchlint.analysis.registration import Status, init_registrations, registration_of

MODEL = '''import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)


class Block(Base):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.register_buffer("mask", torch.ones(dim), persistent=False)
        self.register_buffer("stats", torch.zeros(dim))
        self.layers = nn.ModuleList([nn.Linear(dim, dim)])
        self.heads = [nn.Linear(dim, dim), nn.Linear(dim, dim)]
        self.scale = torch.ones(dim)
        self.dim = 4
        self.params = nn.ParameterList([nn.Parameter(torch.ones(1))])
        self.thing = make_thing()
        self.proj = None
        self.proj = nn.Linear(dim, dim)
        self.add_module("extra", nn.ReLU())

    def forward(self, x):
        y = self.gamma * self.norm(x) * self.mask + self.stats
        return self.proj(y) * self.scale + self.thing
'''
FORWARD = 28  # 1-based line of `y = self.gamma * ...`


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(MODEL.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def block():
    tree, _ = parse(MODEL, "model.py")
    ctx = FileContext(MODEL, "model.py", tree)
    return ctx, ctx.classes["Block"]


@pytest.mark.parametrize("name, status, line, extra", [
    ("gamma", Status.PARAMETER, "self.gamma =", {}),
    ("mask", Status.BUFFER, 'register_buffer("mask"', {"persistent": False}),
    ("stats", Status.BUFFER, 'register_buffer("stats"', {"persistent": True}),
    ("norm", Status.SUBMODULE, "self.norm =", {"module_class": "torch.nn.LayerNorm"}),  # from the base class
    ("layers", Status.MODULE_CONTAINER, "self.layers =", {"module_class": "torch.nn.ModuleList"}),
    ("params", Status.PARAMETER_CONTAINER, "self.params =", {}),
    ("heads", Status.PLAIN_CONTAINER, "self.heads =", {}),
    ("scale", Status.PLAIN_TENSOR, "self.scale =", {}),
    ("dim", Status.PLAIN_VALUE, "self.dim =", {}),
    ("proj", Status.SUBMODULE, "self.proj = nn.Linear", {}),  # the None placeholder is not what it is
    ("extra", Status.SUBMODULE, "add_module", {"module_class": "torch.nn.ReLU"}),
    ("thing", Status.UNKNOWN, None, {}),
])
def test_what_each_attribute_is(block, name, status, line, extra):
    ctx, cls = block
    registration = registration_of(ctx, cls, name)
    assert registration.status is status
    assert registration.line == (line_of(line) if line else None)
    for key, value in extra.items():
        assert getattr(registration, key) == value


def test_inlay_hints_follow_the_assignments_in_init(block):
    ctx, _ = block
    hints = {(position.line, registration.name): registration.word for position, registration in init_registrations(ctx)}
    assert hints[(line_of("self.scale ="), "scale")] == "plain tensor, not registered"
    assert hints[(line_of("self.gamma ="), "gamma")] == "parameter"
    assert (line_of("self.proj = nn.Linear"), "proj") not in hints  # once per name: at its first assignment
    assert hints[(line_of("self.proj = None"), "proj")] == "submodule"


# -- over LSP ------------------------------------------------------------------------------------------
pytestmark_lsp = pytest.mark.asyncio(loop_scope="module")


async def hover(client, uri, line: int, text: str, offset: int = 6):
    column = MODEL.splitlines()[line - 1].index(text) + offset
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line - 1, character=column)))


@pytestmark_lsp
async def test_hover_says_what_self_attributes_are(vscode: LanguageClient, tmp_path):
    client = vscode
    uri = new_uri(tmp_path)
    open_document(client, uri, MODEL)
    published = await wait_for_publish(client, uri, version=1)
    flagged = {d.range.start.line + 1 for d in published.diagnostics if d.code == "TL101"}
    assert flagged == {line_of("self.scale =")}

    gamma = await hover(client, uri, FORWARD, "self.gamma")
    assert gamma.contents.kind == types.MarkupKind.Markdown
    assert gamma.contents.value.startswith("`self.gamma` is a **parameter**")
    assert "line %d" % line_of("self.gamma =") in gamma.contents.value
    assert (gamma.range.start.line, gamma.range.start.character) == (FORWARD - 1, MODEL.splitlines()[FORWARD - 1].index(
        "self.gamma"))
    mask = await hover(client, uri, FORWARD, "self.mask")
    assert "**non-persistent buffer**" in mask.contents.value and "not saved by state_dict()" in mask.contents.value
    norm = await hover(client, uri, FORWARD, "self.norm", offset=2)  # on `self`
    assert "**submodule** (nn.LayerNorm)" in norm.contents.value
    scale = await hover(client, uri, FORWARD + 1, "self.scale")
    assert "**plain tensor, not registered**" in scale.contents.value
    # The flagged assignment keeps the finding's card.
    card = await hover(client, uri, line_of("self.scale ="), "self.scale")
    assert card.contents.value.startswith("**TL101 unregistered-tensor**")
    # Not an attribute of self: nothing.
    assert await hover(client, uri, FORWARD, "y = ", offset=0) is None


async def inlay_hints(client, uri):
    return await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0),
                          end=types.Position(line=len(MODEL.splitlines()), character=0)))) or []


@pytestmark_lsp
async def test_inlay_hints_are_off_by_default_and_say_the_status_when_on(vscode: LanguageClient, tmp_path):
    client = vscode
    uri = new_uri(tmp_path)
    open_document(client, uri, MODEL)
    await wait_for_publish(client, uri, version=1)
    assert await inlay_hints(client, uri) == []
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"torchlint": {"inlayHints": True}}))
    hints = await inlay_hints(client, uri)
    by_line = {hint.position.line + 1: hint for hint in hints}
    scale = by_line[line_of("self.scale =")]
    assert scale.label == "plain tensor, not registered"
    assert scale.position.character == MODEL.splitlines()[line_of("self.scale =") - 1].index(" =")
    assert by_line[line_of("self.gamma =")].label == "parameter"
    assert "**parameter**" in by_line[line_of("self.gamma =")].tooltip.value
    assert line_of("self.thing =") not in by_line  # unknown: no hint
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"torchlint": {"inlayHints": False}}))
    assert await inlay_hints(client, uri) == []
