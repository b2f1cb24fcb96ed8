"""The "Verify (needs inputs)" lens: a class whose run in the editor skipped the gradient checks
for want of example inputs gets it, with forward's inputs by name (``needsInputs``), and the
command given those inputs (``inputShapes`` or ``inputs``, the command line's --input-shape
and --input) runs the gradient checks: the class is verified, not partly verified."""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.uris import to_fs_path
from pytest_lsp import LanguageClient

from torchlint.config import find_config
from torchlint.lsp import verification

from lsp_helpers import add_workspace_folder, lenses, open_document, replace_text, wait_for

in_server_loop = pytest.mark.asyncio(loop_scope="module")  # the tests sharing the module's server

BOUND = 120  # seconds: only stops a hung test (a run imports torch in a child)

# No layer says what width x has, nothing in the file calls it: the probe has no inputs to try.
PICKY = '''import torch
import torch.nn as nn


class Picky(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(37, 5))

    def forward(self, x, scale=1.0):
        return torch.einsum("bi,ij->bj", x, self.weight) * scale


class Easy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


async def verify(client: LanguageClient, argument: dict):
    add_workspace_folder(client, Path(to_fs_path(argument["uri"])).parent)
    return await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[dict(argument, device="cpu")])), BOUND)


def statuses(result: dict) -> dict:
    return {cls["name"]: cls["status"] for cls in result["classes"]}


def gradient_checks(result: dict, name: str) -> dict:
    (cls,) = [cls for cls in result["classes"] if cls["name"] == name]
    return {check["code"]: check["status"] for check in cls["checks"] if check["code"] in ("TL903", "TL904")}


@in_server_loop
async def test_a_run_without_inputs_brings_the_lens_and_given_inputs_verify(vscode: LanguageClient, tmp_path):
    client = vscode
    path = tmp_path / "picky.py"
    path.write_text(PICKY)
    uri = path.as_uri()
    open_document(client, uri, PICKY)
    before = await lenses(client, uri)
    assert "needsInputs" not in before["Picky"].arguments[0] and "needs" not in before["Picky"].title

    refreshes = client.lens_refreshes
    result = await verify(client, {"uri": uri, "className": "Picky"})
    assert statuses(result) == {"Picky": "partly verified"}, result
    assert set(gradient_checks(result, "Picky").values()) == {"skipped"}
    await wait_for(lambda: any("Picky partly verified" in m.message for m in client.messages), BOUND,
                   "the partly verified class shown")
    shown = next(m.message for m in client.messages if "Picky partly verified" in m.message)
    assert "inputShapes" in shown and "--input-shape" in shown  # the editor way and the command-line way
    await wait_for(lambda: client.lens_refreshes > refreshes, BOUND, "workspace/codeLens/refresh after the run")

    after = await lenses(client, uri)
    assert after["Picky"].title.endswith("(needs inputs)")
    assert after["Picky"].arguments[0]["needsInputs"] == ["x"]  # scale has a default
    assert "needsInputs" not in after["Easy"].arguments[0]

    # An edit keeps the lens: the findings go stale, what the class needs does not.
    edited = PICKY.replace("* scale", "* scale  # edited")
    replace_text(client, uri, PICKY, edited, version=2)
    assert (await lenses(client, uri))["Picky"].arguments[0]["needsInputs"] == ["x"]

    result = await verify(client, {"uri": uri, "className": "Picky", "inputShapes": ["2, 37"]})
    assert statuses(result) == {"Picky": "verified"}, result
    assert gradient_checks(result, "Picky") == {"TL903": "passed", "TL904": "passed"}
    assert "--input-shape" in result["classes"][0]["inputs"]
    again = await lenses(client, uri)
    assert "needsInputs" not in again["Picky"].arguments[0] and "needs" not in again["Picky"].title

    result = await verify(client, {"uri": uri, "className": "Picky", "inputs": ["torch.randn(3, 37)"]})
    assert statuses(result) == {"Picky": "verified"}, result
    assert "--input" in result["classes"][0]["inputs"]

    # Inputs that do not fit forward are the user's: a failure (TL905), and a message on how to ask again.
    result = await verify(client, {"uri": uri, "className": "Picky", "inputShapes": ["2, 36"]})
    assert statuses(result) == {"Picky": "failed"}, result
    await wait_for(lambda: any("failed with the inputs given" in m.message for m in client.messages), BOUND,
                   "the failure with the given inputs shown")
    assert "needsInputs" not in (await lenses(client, uri))["Picky"].arguments[0]


@in_server_loop
async def test_a_run_whose_inputs_were_guessed_keeps_the_plain_lens(vscode: LanguageClient, tmp_path):
    client = vscode
    path = tmp_path / "easy.py"
    path.write_text(PICKY)
    uri = path.as_uri()
    open_document(client, uri, PICKY)
    result = await verify(client, {"uri": uri, "className": "Easy"})
    assert statuses(result) == {"Easy": "verified"}, result
    found = await lenses(client, uri)
    assert not any("needsInputs" in command.arguments[0] for command in found.values())


@in_server_loop
@pytest.mark.parametrize("argument, problem", [
    ({"inputShapes": ["2,37"], "inputs": ["torch.randn(2, 37)"]}, "not both"),
    ({"inputShapes": ["2,a"]}, "inputShapes"),
    ({"inputShapes": [2, 37]}, "inputShapes"),
    ({"inputs": ["torch.randn(2,"]}, "not a Python expression"),
    ({"inputs": "torch.randn(2, 37)"}, "`inputs` must be a list"),
])
async def test_bad_inputs_get_an_error(vscode: LanguageClient, tmp_path, argument, problem):
    path = tmp_path / "bad.py"
    path.write_text(PICKY)
    result = await verify(vscode, dict(argument, uri=path.as_uri(), className="Picky"))
    assert problem in result["error"]


# -- in this process ----------------------------------------------------------------------------

def test_the_lens_names_what_is_missing(tmp_path):
    text = PICKY.replace("def __init__(self):", "def __init__(self, dim):", 1)
    path = tmp_path / "m.py"
    path.write_text(text)
    found = verification.code_lenses(path.as_uri(), text, str(path), "cpu", find_config, None,
                                     frozenset({"Picky", "Easy"}))
    by_class = {lens.command.arguments[0]["className"]: lens.command for lens in found}
    assert by_class["Picky"].title == "Verify (needs dim, inputs)"
    assert by_class["Picky"].arguments[0]["needsArguments"] == ["dim"]
    assert by_class["Easy"].title == "Verify (needs inputs)"


def test_forward_inputs_by_name():
    cases = {"def forward(self, x, mask, flag=False): pass": ["x", "mask"],
             "def forward(self, *args): pass": ["input"],
             "def forward(self, x, /, y): pass": ["x", "y"],
             "pass": ["input"]}  # an inherited forward
    for body, names in cases.items():
        node = ast.parse("class M:\n    %s\n" % body).body[0]
        assert verification.forward_inputs(node) == names, body


def test_a_run_updates_which_classes_want_inputs():
    before = frozenset({"A", "B"})
    assert verification.still_wanting(before, {"A": False, "C": True}) == {"B", "C"}
    assert verification.still_wanting(frozenset(), {}) == frozenset()


def test_command_arguments_take_inputs():
    parsed = verification.parse_arguments(({"uri": "file:///m.py", "inputShapes": ["2,16", "2,8:long"]},))
    assert parsed["input_shapes"] == ["2,16", "2,8:long"] and parsed["input_exprs"] is None
    parsed = verification.parse_arguments(({"uri": "file:///m.py", "inputShapes": "2,16;4"},))
    assert parsed["input_shapes"] == "2,16;4"
    with pytest.raises(ValueError, match="unknown dtype"):
        verification.parse_arguments(({"uri": "file:///m.py", "inputShapes": ["2,8:complex"]},))
    parsed = verification.parse_arguments(({"uri": "file:///m.py", "inputs": [" torch.randn(2, 16) "]},))
    assert parsed["input_exprs"] == ["torch.randn(2, 16)"] and parsed["input_shapes"] is None
