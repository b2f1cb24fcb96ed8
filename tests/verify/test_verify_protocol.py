"""The runner <-> probe protocol (verify/protocol.py): one JSON form, read back to the same
request; a result the probe (or the user's code in its process) garbled still reads as a
ProbeResult of the right types; the module loads by path with the standard library only, as
the probe loads it in an interpreter that has neither torchlint nor torch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.verify import protocol
from torchlint.verify.protocol import Constructor, ImportTarget, InputShape, ProbeFailure, ProbeRequest, ProbeResult

FULL_REQUEST = ProbeRequest(
    path="/p/model.py", result_path="/t/result.json", stack_path="/t/stack.txt", deadline=1234.5,
    class_name="Net", device="cuda:1", init_kwargs={"dim": 16, "dims": [1, 2]},
    input_shapes=[InputShape([2, 16]), InputShape([2, 8], "int64")], input_exprs=["torch.ones(2, 16)"],
    import_target=ImportTarget("pkg.model", "/p"), extra_paths=["/p/scripts"],
    constructors={"Net": [Constructor("a.py:3, a call site", expression="Net(16)"),
                          Constructor("pyproject.toml", factory="pkg.build:net", before_defaults=True),
                          Constructor("a.py:9, factory small()", expression="small(pretrained=False)", made_up=True)]},
    input_calls={"Net": [{"args": ["torch.randn(2, 16)"], "kwargs": {}, "origin": "demo.py:9", "built_with": None}]},
    ddp=True, memory_share=0.25)


def test_a_request_reads_back_as_it_was_written():
    assert ProbeRequest.from_json(FULL_REQUEST.to_json()) == FULL_REQUEST
    minimal = ProbeRequest(path="/p/m.py", result_path="/t/r", stack_path="/t/s", deadline=1.0)
    assert ProbeRequest.from_json(minimal.to_json()) == minimal


def test_the_wire_names():
    data = json.loads(FULL_REQUEST.to_json())
    assert set(data) == {"path", "result_path", "stack_path", "deadline", "class_name", "device", "init_kwargs",
                         "input_shapes", "input_exprs", "import", "extra_paths", "constructors", "input_calls",
                         "ddp", "class_inputs", "feeders", "memory_share"}
    assert data["import"] == {"root": "/p", "module": "pkg.model"}
    assert data["input_shapes"][1] == {"shape": [2, 8], "dtype": "int64"}
    assert data["constructors"]["Net"] == [{"origin": "a.py:3, a call site", "expression": "Net(16)"},
                                           {"origin": "pyproject.toml", "factory": "pkg.build:net",
                                            "before_defaults": True},
                                           {"origin": "a.py:9, factory small()", "expression": "small(pretrained=False)",
                                            "made_up": True}]


@pytest.mark.parametrize("given", [0, -1, 1.5, "0.5", True, None])
def test_a_memory_share_that_is_no_share_reads_as_no_bound(given):
    data = dict(json.loads(FULL_REQUEST.to_json()), memory_share=given)
    assert ProbeRequest.from_dict(data).memory_share == 1.0


def test_a_result_reads_back_as_it_was_written():
    result = ProbeResult(finished=True, phase="done", python="3.11.7", torch_version="2.13.0", device="cpu",
                         device_note="CPU run", imported_as="path", error=ProbeFailure("no_class", "no class X"),
                         file_issues=[{"code": "TL905", "message": "m"}], classes=[{"name": "Net", "issues": []}])
    assert ProbeResult.from_json(result.to_json()) == result


@pytest.mark.parametrize("text", [
    '{"finished": "yes", "phase": 3, "classes": "many", "file_issues": {"a": 1}, "device": ["cpu"], "error": 0}',
    '{"classes": [3, {"name": "Net"}], "file_issues": [null, {"code": "TL905"}], "error": {"kind": 5}}',
    '{"error": "just a string", "device_note": null}',
    '{}',
])
def test_a_garbled_result_still_has_the_right_types(text):
    result = ProbeResult.from_json(text)
    assert isinstance(result.finished, bool) and isinstance(result.phase, str) and isinstance(result.device_note, str)
    assert result.device is None or isinstance(result.device, str)
    assert all(isinstance(entry, dict) for entry in result.classes + result.file_issues)
    assert result.error is None or isinstance(result.error.message, str) and result.error.message
    assert result.finished is False or json.loads(text).get("finished") is True


def test_a_result_that_is_not_an_object_is_none():
    assert ProbeResult.from_json("[1, 2]") is None


def test_the_module_loads_by_path_with_the_standard_library_only(tmp_path):
    # -I: no user site, no PYTHONPATH: neither torchlint nor anything else of this checkout.
    script = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('torchlint_protocol', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules[spec.name] = module\n"
        "spec.loader.exec_module(module)\n"
        "request = module.ProbeRequest.from_json(sys.stdin.read())\n"
        "assert 'torch' not in sys.modules and 'torchlint' not in sys.modules\n"
        "print(request.to_json())\n")
    done = subprocess.run([sys.executable, "-I", "-c", script, str(Path(protocol.__file__))],
                          input=FULL_REQUEST.to_json(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ProbeRequest.from_json(done.stdout) == FULL_REQUEST
