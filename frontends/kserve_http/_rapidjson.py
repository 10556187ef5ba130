"""JSON text as Triton's HTTP endpoint reads and writes it (RapidJSON behind ``TritonJson``).

Python's ``json`` does the work at C speed; this module adjusts the few
places where RapidJSON differs:

- numbers: the same shortest round-trip digits, laid out as RapidJSON does
  (``1e-7``, ``1.5e38``, ``0.00001``, ``10000000000000000.0``; Python writes
  ``1e-07``, ``1.5e+38``, ``1e-05``, ``1e+16``); NaN and infinities as
  ``NaN``/``Infinity``/``-Infinity``;
- strings: UTF-8 as is, control characters as ``\\u00XX`` with upper-case hex,
  and bytes that are not UTF-8 passed through raw in both directions
  (``surrogateescape``), as RapidJSON neither validates nor escapes them;
- parse errors: RapidJSON's message and offset
  (``failed to parse the request JSON buffer: Invalid value. at 12``), with
  INVALID_ARG (HTTP 400) where Triton answers INTERNAL (500).

Runs in the core process, called by :mod:`.codec`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...core.api import Code, TritonError

__all__ = ["dumps", "encode", "fix_floats", "strings_json", "loads"]

#: compact JSON text of plain data (C encoder; floats need :func:`fix_floats`)
encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode

# Python uses exponent notation when the decimal exponent e is < -4 or >= 16; RapidJSON (its
# Prettify step) uses fixed notation for -6 < e + 1 <= 21 and writes exponents bare.
_FLOAT_EXP = re.compile(r"(-?)(\d)(?:\.(\d+))?e([+-]\d+)")


def _rapidjson_float(match: re.Match[str]) -> str:
    sign, first, fraction, exponent = match.groups()
    fraction = fraction or ""
    digits = first + fraction
    point = int(exponent) + 1  # value = 0.<digits> * 10**point
    if -6 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if 0 < point <= 21:
        if len(digits) <= point:
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{first}{'.' + fraction if fraction else ''}e{point - 1}"


def fix_floats(text: str) -> str:
    """Rewrite the exponent-form numbers of ``text`` as RapidJSON writes them.

    ``text`` must hold numbers only (a JSON array of numbers), no strings.
    """
    return _FLOAT_EXP.sub(_rapidjson_float, text) if "e" in text else text


def _float_text(value: float) -> str:
    return fix_floats(encode(value))


def _write(obj: Any, out: list[str]) -> None:
    """Write ``obj`` (dicts, lists, scalars) as JSON, floats as RapidJSON writes them."""
    if isinstance(obj, float):
        out.append(_float_text(obj))
    elif isinstance(obj, dict):
        out.append("{")
        for i, (key, value) in enumerate(obj.items()):
            out.append(("," if i else "") + encode(str(key)) + ":")
            _write(value, out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            _write(value, out)
        out.append("]")
    else:
        out.append(encode(obj))


def _has_floats(obj: Any) -> bool:
    if isinstance(obj, float):
        return True
    if isinstance(obj, dict):
        return any(_has_floats(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_floats(v) for v in obj)
    return False


def to_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``text``; characters decoded from non-UTF-8 bytes become those bytes again."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate from a \\uD8xx escape
        return text.encode("utf-8", "replace")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj`` as Triton writes them (metadata, statistics, errors, ...)."""
    if not _has_floats(obj):
        return to_bytes(encode(obj))
    out: list[str] = []
    _write(obj, out)
    return to_bytes("".join(out))


_CONTROL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([01][a-f])")


def strings_json(items: list[str]) -> str:
    """A JSON array of strings, control characters escaped with upper-case hex as RapidJSON does."""
    text = encode(items)
    if "\\u00" in text:
        text = _CONTROL_ESCAPE.sub(lambda m: f"{m.group(1)}\\u00{m.group(2).upper()}", text)
    return text


# -- parsing ---------------------------------------------------------------------------------------


def _container_at(text: str, pos: int) -> str:
    """The innermost bracket (``{`` or ``[``) open at ``pos`` (error path only)."""
    stack: list[str] = []
    for token in re.findall(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text[:pos]):
        if token in "[{":
            stack.append(token)
        elif token in "]}" and stack:
            stack.pop()
    return stack[-1] if stack else "{"


def _parse_error(exc: json.JSONDecodeError) -> TritonError:
    msg, pos, doc = exc.msg, exc.pos, exc.doc
    if msg == "Expecting value":
        text = "The document is empty." if not doc.strip() else "Invalid value."
    elif msg.startswith("Unexpected UTF-8 BOM"):
        text = "Invalid value."
    elif msg == "Expecting ',' delimiter":
        text = (
            "Missing a comma or '}' after an object member."
            if _container_at(doc, pos) == "{"
            else "Missing a comma or ']' after an array element."
        )
    elif msg.startswith("Expecting property name"):
        text = "Missing a name for object member."
    elif msg == "Expecting ':' delimiter":
        text = "Missing a colon after a name of object member."
    elif msg == "Extra data":
        text = "The document root must not be followed by other values."
    elif msg.startswith("Unterminated string"):
        text, pos = "Missing a closing quotation mark in string.", len(doc)
    elif msg.startswith("Invalid control character"):
        nul = pos < len(doc) and doc[pos] == "\x00"
        text = "Invalid encoding in string."
        if nul:
            text = "Missing a closing quotation mark in string."
    elif msg.startswith("Invalid \\escape"):
        text = "Invalid escape character in string."
    elif msg.startswith("Invalid \\uXXXX"):
        text = "Incorrect hex digit after \\u escape in string."
    else:
        text = msg + "."
    return TritonError(Code.INVALID_ARG, f"failed to parse the request JSON buffer: {text} at {pos}")


#: integer literals longer than this are read as doubles, as RapidJSON reads numbers beyond 64 bits
#: (Python refuses to convert integer text of more than 4300 digits)
_LONG_INT = 400


def _number(text: str) -> int | float:
    return float(text) if len(text) > _LONG_INT else int(text)


def loads(buffer: memoryview | bytes) -> Any:
    """Parse a JSON document; bytes that are not UTF-8 survive inside strings.

    An integer of hundreds of digits is read as a double (RapidJSON's
    reading; the checks then refuse it where an integer is needed).

    :raises TritonError: INVALID_ARG with RapidJSON's message and offset
        (Triton 2.51 answers INTERNAL), also for a document nested too deeply.
    """
    text = str(buffer, "utf-8", "surrogateescape")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _parse_error(exc) from None
    except RecursionError:
        raise TritonError(Code.INVALID_ARG, _TOO_DEEP) from None
    except ValueError:  # an integer beyond Python's digit limit: read long ones as doubles
        pass
    try:
        return json.loads(text, parse_int=_number)
    except json.JSONDecodeError as exc:
        raise _parse_error(exc) from None
    except RecursionError:
        raise TritonError(Code.INVALID_ARG, _TOO_DEEP) from None
    except ValueError as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to parse the request JSON buffer: {exc}") from None


_TOO_DEEP = "failed to parse the request JSON buffer: the document is nested too deeply"
