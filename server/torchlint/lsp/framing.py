"""stdin for pygls's frame reader, resynchronising after a malformed frame.

pygls 2.1 reads header lines until one is exactly ``Content-Length: N\\r\\n``. A frame sent
without that header leaves its body unread; the reader then takes the body and the next
frame's header as one "line", does not recognise it, and so swallows the next request too.
This wrapper hands pygls a clean ``Content-Length`` line wherever one ends a header line
(after the debris of a bad frame, spelled in another case or spacing, or ending in a bare
``\\n``) and logs what it threw away. Bodies (``read``) pass through untouched; the last one is
kept, so that a body pygls cannot decode (not JSON, or nested deeper than the decoder's recursion
limit: 100,000 brackets) is answered with an error under the id it was sent with
(:func:`request_id`) rather than dropped, the client waiting forever.
"""
from __future__ import annotations

import json
import logging
import re
from typing import BinaryIO, Optional, Union

log = logging.getLogger("torchlint.lsp")

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n$", re.IGNORECASE)
_HEADER = re.compile(rb"[A-Za-z0-9-]+[ \t]*:[^\r\n]*\r?\n")
_DEBRIS_SHOWN = 200  # bytes of a bad frame quoted in the log
# A JSON string or a bracket: what request_id walks through, never recursing
_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_ID_VALUE = re.compile(rb'[ \t\r\n]*:[ \t\r\n]*(-?[0-9]+|"(?:[^"\\]|\\.)*")')


class ResyncingReader:
    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self.last_body = b""  # the body read last: the one pygls is decoding or failed to

    def readline(self) -> bytes:
        line = self._stream.readline()
        match = _CONTENT_LENGTH.search(line)
        if match is None:
            if line.strip() and not _HEADER.fullmatch(line):
                log.error("skipped a malformed frame (no Content-Length header): %r", line[:_DEBRIS_SHOWN])
            return line
        if match.start() > 0:
            log.error("skipped a malformed frame (no Content-Length header): %r", line[:match.start()][:_DEBRIS_SHOWN])
        return b"Content-Length: %d\r\n" % int(match.group(1))

    def read(self, size: int = -1) -> bytes:
        self.last_body = self._stream.read(size)
        return self.last_body


def request_id(body: bytes) -> Optional[Union[int, str]]:
    """The ``id`` member of the object ``body`` holds, read without decoding the rest (which may be
    nested past any recursion limit, or cut short); None where there is no readable one."""
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(body):
        text = token.group()
        if text in (b"[", b"{"):
            if depth == 0 and text == b"[":
                return None  # a batch, or not a message
            depth += 1
        elif text in (b"]", b"}"):
            depth -= 1
        elif depth == 1 and text == b'"id"':
            value = _ID_VALUE.match(body, token.end())
            if value is not None:  # (else "id" was a value, not the key)
                try:
                    found = json.loads(value.group(1))
                except ValueError:
                    return None
                return found if isinstance(found, (int, str)) else None
    return None
