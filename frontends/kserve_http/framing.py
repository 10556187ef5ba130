"""The framing pieces of an HTTP/1.1 connection: a request head's parser callbacks, status lines, keep-alive.

Pure functions and a callback holder for :class:`~.connection.HttpConnection`
(RFC 9112); no I/O.
"""

from __future__ import annotations

import json
from http import HTTPStatus

__all__ = ["Head", "HEAD_END", "CONTINUE", "status_lines", "keep_alive", "url_path", "json_string"]

#: the end of a request head
HEAD_END = b"\r\n\r\n"
_HEADER_NAMES: dict[bytes, str] = {}  # header names as sent -> lower-case text
_REASONS = {s.value: s.phrase for s in HTTPStatus}
#: the interim answer to ``Expect: 100-continue``
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Head:
    """httptools callbacks for one request head (a fresh parser per head)."""

    __slots__ = ("url", "headers", "complete", "body", "body_size", "message_done", "limit")

    def __init__(self) -> None:
        self.limit = 0
        self.url = b""
        self.headers: dict[str, str] = {}
        self.complete = False
        self.body: bytearray | None = None
        self.body_size = 0
        self.message_done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = _HEADER_NAMES.get(name)
        if key is None:
            key = name.decode("latin-1").lower()
            if len(_HEADER_NAMES) < 256:  # the names clients send are few; strangers are not kept
                _HEADER_NAMES[name] = key
        if key not in self.headers:
            self.headers[key] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.complete = True

    def on_body(self, data: bytes) -> None:  # chunked bodies only (kept up to the limit)
        if self.body is not None and not self.message_done:
            self.body_size += len(data)
            if self.body_size <= self.limit:
                self.body += data

    def on_message_complete(self) -> None:
        self.message_done = True


_STATUS_LINES: dict[tuple[int, str | None], str] = {}


def status_lines(status: int, content_type: str | None) -> str:
    """The status line and the Content-Type header (cached: few combinations occur)."""
    text = _STATUS_LINES.get((status, content_type))
    if text is None:
        text = f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
        if content_type is not None:
            text += f"Content-Type: {content_type}\r\n"
        if len(_STATUS_LINES) < 256:
            _STATUS_LINES[(status, content_type)] = text
    return text


def keep_alive(http10: bool, connection: str | None) -> bool:
    """Whether the connection stays open after the response (RFC 9112 section 9.3)."""
    if not connection:
        return not http10
    tokens = {token.strip() for token in connection.lower().split(",")}
    return "keep-alive" in tokens if http10 else "close" not in tokens


def url_path(url: bytes) -> str:
    """The path of a request target, still percent-encoded (routes match it; parameters are decoded)."""
    return url.split(b"?", 1)[0].split(b"#", 1)[0].decode("latin-1")


def json_string(text: str) -> str:
    """``text`` as a JSON string literal."""
    return json.dumps(text)
