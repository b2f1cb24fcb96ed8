"""stdin for pygls's frame reader, resynchronising after a malformed frame.

pygls 2.1 reads header lines until one is exactly ``Content-Length: N\\r\\n``. A frame sent
without that header leaves its body unread; the reader then takes the body and the next
frame's header as one "line", does not recognise it, and so swallows the next request too.
This wrapper hands pygls a clean ``Content-Length`` line wherever one ends a header line
(after the debris of a bad frame, spelled in another case or spacing, or ending in a bare
``\\n``) and logs what it threw away. Bodies (``read``) pass through untouched.
"""
from __future__ import annotations

import logging
import re
from typing import BinaryIO

log = logging.getLogger("torchlint.lsp")

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n$", re.IGNORECASE)
_HEADER = re.compile(rb"[A-Za-z0-9-]+[ \t]*:[^\r\n]*\r?\n")
_DEBRIS_SHOWN = 200  # bytes of a bad frame quoted in the log


class ResyncingReader:
    def __init__(self, stream: BinaryIO):
        self._stream = stream

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
        return self._stream.read(size)
