"""The server process at the wire level: raw frames in, raw frames out."""
from __future__ import annotations

import json
import re
import subprocess

from lsp_helpers import CONFIG


def test_malformed_requests_get_an_error_answer():
    """Raw frames: params that do not fit the protocol's types are answered, not dropped,
    and only LSP frames ever reach stdout."""
    def frame(message):
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {"textDocument": {"uri": 3}}},
        {"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}}},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    done = subprocess.run(CONFIG.server_command, input=b"".join(frame(m) for m in messages),
                          env=CONFIG.server_env, capture_output=True, timeout=180)
    responses = {}
    data = done.stdout
    while data:
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))
        message = json.loads(rest[:length])
        data = rest[length:]
        if "id" in message:
            responses[message["id"]] = message
    assert responses[2]["error"]["code"] == -32602
    assert responses[3] == {"jsonrpc": "2.0", "id": 3, "result": None}
    assert done.returncode == 0


def test_the_server_never_imports_torch():
    code = ("import sys; from torchlint.lsp.server import create_server; create_server(); "
            "from torchlint.analysis.engine import check_source; "
            "check_source(open(sys.argv[1]).read(), sys.argv[1]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run(CONFIG.server_command[:1] + ["-c", code, "examples/scaled_block.py"],
                          env=CONFIG.server_env, capture_output=True, text=True, timeout=180,
                          cwd=str(__import__("lsp_helpers").ROOT))
    assert done.returncode == 0, done.stderr
