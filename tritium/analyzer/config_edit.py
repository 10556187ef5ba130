"""Writing a changed ``ModelConfig`` as an edit of the ``config.pbtxt`` text it came from.

``tritium-analyzer``'s ``best/config.pbtxt`` must diff cleanly against the
model's own file: the comments, the field order and the layout of every
field the candidate did not change stay as they were. :func:`edit_config_text`
finds the fields of the original text (protobuf text format, as Triton reads
it: ``name: value``, ``name { ... }``, ``name: [ ... ]``, ``#`` comments,
``,``/``;`` separators), and for each field whose value differs between the
old and new message it:

- edits inside it, when it is a message (or a list of as many messages as
  before) written once in the text: so ``instance_group [ { kind: KIND_CPU } ]``
  becomes ``instance_group [ { kind: KIND_CPU count: 2 } ]``;
- else replaces it with protobuf's rendering of the new value (written where
  the first occurrence was), deletes it when the new message lacks it, or
  appends it at the end of its message when the text lacked it.

The result is parsed back and compared with the new message; when they differ
(text this editor does not follow, e.g. extensions or ``Any`` expansions) the
plain protobuf rendering is returned instead, so the text is always exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

__all__ = ["edit_config_text"]

_TOKEN = re.compile(
    r"""(?P<skip>\s+|[,;])
      | (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<open>[{\[<])
      | (?P<close>[}\]>])
      | (?P<colon>:)
      | (?P<word>[^\s{}\[\]<>:,;\#"']+)""",
    re.X,
)
_CLOSING = {"{": "}", "<": ">", "[": "]"}


class _Unsupported(ValueError):
    """Text the editor does not follow (the caller falls back to a full rendering)."""


@dataclass(slots=True)
class _Body:
    """The text between a message's braces (``start``..``end``), and its fields in text order."""

    start: int
    end: int
    fields: list[_Field] = field(default_factory=list)


@dataclass(slots=True)
class _Field:
    """One ``name ...`` occurrence: its span, and the bodies of the messages its value holds."""

    name: str
    start: int
    end: int
    messages: list[_Body] = field(default_factory=list)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.tokens = [(m.lastgroup, m.start(), m.end()) for m in _TOKEN.finditer(text)]
        if sum(e - s for _, s, e in self.tokens) != len(text):
            raise _Unsupported("untokenizable text")
        self.tokens = [t for t in self.tokens if t[0] not in ("skip", "comment")]
        self.text = text
        self.i = 0

    def peek(self) -> tuple[str | None, int, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str | None, int, int]:
        token = self.peek()
        if token is None:
            raise _Unsupported("unexpected end of text")
        self.i += 1
        return token

    def body(self, start: int, closing: str | None) -> _Body:
        """Fields up to ``closing`` (None: the end of the text); consumes the closing token."""
        out = _Body(start, len(self.text))
        while True:
            token = self.peek()
            if token is None:
                if closing is not None:
                    raise _Unsupported("unclosed message")
                return out
            kind, s, e = token
            if kind == "close":
                if self.text[s:e] != closing:
                    raise _Unsupported("mismatched bracket")
                self.i += 1
                out.end = s
                return out
            if kind != "word":
                raise _Unsupported(f"unexpected {self.text[s:e]!r}")
            self.i += 1
            item = _Field(self.text[s:e], s, e)
            nxt = self.peek()
            if nxt is not None and nxt[0] == "colon":
                self.i += 1
            item.end = self.value(item)
            out.fields.append(item)

    def value(self, item: _Field) -> int:
        """Consume one value of ``item``; return where it ends."""
        kind, s, e = self.take()
        if kind == "open":
            opened = self.text[s:e]
            if opened == "[":
                return self.list(item)
            body = self.body(e, _CLOSING[opened])
            item.messages.append(body)
            return body.end + 1
        if kind == "string":
            while (nxt := self.peek()) is not None and nxt[0] == "string":  # adjacent strings concatenate
                e = self.take()[2]
            return e
        if kind == "word":
            if self.text[s:e] == "-" and (nxt := self.peek()) is not None and nxt[0] == "word":
                e = self.take()[2]
            return e
        raise _Unsupported(f"unexpected {self.text[s:e]!r}")

    def list(self, item: _Field) -> int:
        while True:
            token = self.peek()
            if token is None:
                raise _Unsupported("unclosed list")
            if token[0] == "close":
                self.i += 1
                if self.text[token[1] : token[2]] != "]":
                    raise _Unsupported("mismatched bracket")
                return token[2]
            self.value(item)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_at(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _render(message: Message, name: str, indent: str) -> str:
    """``name``'s value in ``message`` as text format lines, each indented by ``indent``, no trailing newline."""
    only = type(message)()
    only.CopyFrom(message)
    for fd in message.DESCRIPTOR.fields:
        if fd.name != name:
            only.ClearField(fd.name)
    text = text_format.MessageToString(only).rstrip("\n")
    return "\n".join(indent + line if line else line for line in text.split("\n"))


def _field_set(message: Message, fd: FieldDescriptor) -> bool:
    if fd.label == FieldDescriptor.LABEL_REPEATED:
        return len(getattr(message, fd.name)) > 0
    if fd.has_presence:
        return message.HasField(fd.name)
    return getattr(message, fd.name) != fd.default_value


def _values_differ(old: Message, new: Message, fd: FieldDescriptor) -> bool:
    if _field_set(old, fd) != _field_set(new, fd):
        return True
    return bool(getattr(old, fd.name) != getattr(new, fd.name))


def _edits(text: str, body: _Body, old: Message, new: Message, parent_indent: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) edits that turn ``body`` (holding ``old``) into ``new``."""
    edits: list[tuple[int, int, str]] = []
    by_name: dict[str, list[_Field]] = {}
    for item in body.fields:
        by_name.setdefault(item.name, []).append(item)
    known = set(new.DESCRIPTOR.fields_by_name)
    if not set(by_name) <= known:
        raise _Unsupported(f"fields {sorted(set(by_name) - known)}")
    inline = "\n" not in text[body.start : body.end]
    field_indent = _indent_at(text, body.fields[0].start) if body.fields and not inline else parent_indent + "  "
    appended: list[str] = []
    for fd in new.DESCRIPTOR.fields:
        if not _values_differ(old, new, fd):
            continue
        found = by_name.get(fd.name, [])
        if fd.message_type is not None and found and _field_set(new, fd) and not fd.message_type.GetOptions().map_entry:
            bodies = [b for item in found for b in item.messages]
            if fd.label == FieldDescriptor.LABEL_REPEATED:
                olds, news = list(getattr(old, fd.name)), list(getattr(new, fd.name))
            else:
                olds, news = [getattr(old, fd.name)], [getattr(new, fd.name)]
            if len(bodies) == len(olds) == len(news):
                for b, o, n in zip(bodies, olds, news, strict=True):
                    edits += _edits(text, b, o, n, _indent_at(text, found[0].start))
                continue
        if found:
            first = found[0]
            if _field_set(new, fd):
                rendered = _render(new, fd.name, "").replace("\n", "\n" + _indent_at(text, first.start))
                edits.append((first.start, first.end, rendered))
            else:
                edits.append(_deletion(text, first))
            edits += [_deletion(text, item) for item in found[1:]]
        elif _field_set(new, fd):
            appended.append(_render(new, fd.name, "" if inline else field_indent))
    if appended:
        if inline:  # "{ kind: KIND_CPU }" -> "{ kind: KIND_CPU count: 2 }"
            words = " ".join(" ".join(a.split()) for a in appended)
            before = text[body.end - 1] if body.end > 0 else " "
            edits.append((body.end, body.end, f"{words} " if before.isspace() else f" {words}"))
        else:
            at = _line_start(text, body.end) if text[_line_start(text, body.end) : body.end].strip() == "" else body.end
            prefix = "" if at == _line_start(text, at) else "\n"
            if at == len(text) and text and not text.endswith("\n"):
                prefix = "\n"
            edits.append((at, at, prefix + "\n".join(appended) + "\n"))
    return edits


def _deletion(text: str, item: _Field) -> tuple[int, int, str]:
    """Remove ``item``; with its whole line(s), and a comment that ends its last line, when no other
    field is on them."""
    start, end = item.start, item.end
    line_start = _line_start(text, start)
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[end:line_end].lstrip(" \t,;")
    if text[line_start:start].strip() == "" and (rest == "" or rest.startswith("#")):  # its comment goes too
        return line_start, min(line_end + 1, len(text)), ""
    return start, end, ""


def edit_config_text(text: str, old: Message, new: Message) -> str:
    """``text`` (the text format of ``old``) edited so that it parses to ``new``.

    Comments, field order and the layout of the fields that did not change are kept.

    :param old: what ``text`` parses to.
    :param new: the message wanted (same type).
    :returns: the edited text; protobuf's full rendering of ``new`` when ``text`` holds
        something this editor does not follow (the result always parses to ``new``).
    """
    try:
        scanner = _Scanner(text)
        body = scanner.body(0, None)
        edited = text
        for start, end, replacement in sorted(_edits(text, body, old, new, ""), key=lambda e: e[0], reverse=True):
            edited = edited[:start] + replacement + edited[end:]
        check = type(new)()
        text_format.Parse(edited, check)
        if check == new:
            return edited
    except (_Unsupported, text_format.ParseError):
        pass
    return text_format.MessageToString(new)
