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
            "from torchlint.engine import check_source; "
            "check_source(open(sys.argv[1]).read(), sys.argv[1]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run(CONFIG.server_command[:1] + ["-c", code, "examples/scaled_block.py"],
                          env=CONFIG.server_env, capture_output=True, text=True, timeout=180,
                          cwd=str(__import__("lsp_helpers").ROOT))
    assert done.returncode == 0, done.stderr


def test_a_frame_without_content_length_does_not_swallow_the_next():
    """A frame with no Content-Length header (a broken client, a stray write) is skipped and
    logged; the request after it is answered."""
    def frame(message, header="Content-Length: %d"):
        body = json.dumps(message).encode()
        return (header % len(body) if "%d" in header else header).encode() + b"\r\n\r\n" + body

    hover = {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}}
    stream = b"".join([
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}}),
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        frame({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": hover},
              header="Content-Type: application/vscode-jsonrpc; charset=utf-8"),
        frame({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": hover}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": hover}).encode(),
        frame({"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": hover},
              header="content-length:%d"),
        frame({"jsonrpc": "2.0", "id": 6, "method": "shutdown"}),
        frame({"jsonrpc": "2.0", "method": "exit"}),
    ])
    server = subprocess.Popen(CONFIG.server_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=CONFIG.server_env)
    try:
        out, err = server.communicate(stream, timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    responses = {}
    while out:
        header, _, rest = out.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))
        message = json.loads(rest[:length])
        out = rest[length:]
        responses.setdefault(message.get("id"), message)
    assert responses[3] == {"jsonrpc": "2.0", "id": 3, "result": None}
    assert responses[5] == {"jsonrpc": "2.0", "id": 5, "result": None}
    assert responses[6]["result"] is None
    assert 2 not in responses and 4 not in responses  # no header, no request: skipped
    assert b"malformed frame" in err
    assert server.returncode == 0


def test_a_message_that_cannot_be_decoded_is_answered_and_the_server_goes_on():
    """A body nested 100,000 deep (past the JSON decoder's recursion limit) and one cut short were
    dropped with a log line: the client waited for ever. Each is answered with a parse error under
    its id where one can be read (null where none can), and the requests after them are served."""
    def frame(body):
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    deep = b"[" * 100_000 + b"]" * 100_000
    hover = {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}}
    stream = b"".join([
        frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"capabilities": {}, "processId": None}}).encode()),
        frame(b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'),
        frame(b'{"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": %s}' % deep),
        frame(b'{"jsonrpc": "2.0", "method": "textDocument/hover", "params": {"id": 5, "x": %s}}' % deep),
        frame(b'{"jsonrpc": "2.0", "method": "textDocument/hover", "id": "three", "params": {"text'),
        frame(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": hover}).encode()),
        frame(b'{"jsonrpc": "2.0", "id": 6, "method": "shutdown"}'),
        frame(b'{"jsonrpc": "2.0", "method": "exit"}'),
    ])
    server = subprocess.Popen(CONFIG.server_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=CONFIG.server_env)
    try:
        out, _ = server.communicate(stream, timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    answers = []
    while out:
        header, _, rest = out.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))
        message = json.loads(rest[:length])
        out = rest[length:]
        if "method" not in message:
            answers.append((message["id"], message.get("error", {}).get("code"), "result" in message))
    assert answers == [(1, None, True), (2, -32700, False), (None, -32700, False), ("three", -32700, False),
                       (4, None, True), (6, None, True)]
    assert server.returncode == 0
