"""The worker protocol's declared frames (core/worker/protocol.py) against the code that
sends and handles them, and against the encoder/decoder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tritium.core.worker.protocol import FRAMES, ExecuteRequest, FrameDecoder, Kind, encode

CORE = Path(__file__).resolve().parents[4] / "core"
#: the modules that send and receive frames, by process
WORKER_SIDE = ["worker/main.py", "worker/outputs.py", "worker/bls.py", "worker/metric_cells.py"]
CORE_SIDE = ["worker/process.py", "model/bls.py", "model/instance.py"]


def _kinds_named(files: list[str]) -> set[Kind]:
    """The kinds that ``Kind.<NAME>`` names in ``files``."""
    names: set[Kind] = set()
    for name in files:
        for node in ast.walk(ast.parse((CORE / name).read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Kind":
                names.add(Kind[node.attr])
    return names


def test_every_kind_is_declared() -> None:
    assert set(FRAMES) == set(Kind)
    for frame in FRAMES.values():
        assert frame.direction in ("->", "<-", "<>")
        assert len(set(frame.fields)) == len(frame.fields)


def test_declared_directions_match_senders_and_handlers() -> None:
    """Each kind is named on the side that sends it and on the side that handles it."""
    worker, core = _kinds_named(WORKER_SIDE), _kinds_named(CORE_SIDE)
    for kind, frame in FRAMES.items():
        assert kind in worker, f"{kind.name}: not named in the worker's modules"
        assert kind in core, f"{kind.name}: not named in the core's modules"
        assert frame.direction in ("->", "<-", "<>"), kind


def test_the_docstring_table_lists_the_declared_kinds() -> None:
    from tritium.core.worker import protocol

    table = re.findall(r"^([A-Z_]+(?: / [A-Z_]+)?)\s+(<-|->|<>)\s", protocol.__doc__ or "", re.M)
    listed: dict[str, str] = {}
    for names, direction in table:
        for name in names.split(" / "):
            listed[name] = direction
    assert listed.keys() == {kind.name for kind in Kind}
    for kind, frame in FRAMES.items():
        if kind not in (Kind.PING, Kind.PONG):  # one row "PING / PONG  <>"
            assert listed[kind.name] == frame.direction, kind.name


def test_each_declared_frame_round_trips() -> None:
    """A frame with the declared number of items encodes and decodes unchanged, fds matched."""
    decoder = FrameDecoder()
    for kind, frame in FRAMES.items():
        message = [int(kind), *range(len(frame.fields))]
        data = encode(message, frame.fds)
        fds = list(range(100, 100 + frame.fds))
        [(decoded, got_fds)] = list(decoder.feed(data, fds))
        assert decoded == message and got_fds == fds
        assert Kind(decoded[0]) is kind


def test_execute_request_keys() -> None:
    """The EXECUTE request's declared keys: what InputStaging.stage writes and build_requests reads."""
    assert ExecuteRequest.__required_keys__ == {
        "id",
        "corr",
        "flags",
        "timeout",
        "priority",
        "inputs",
        "outputs",
        "params",
    }
    assert ExecuteRequest.__optional_keys__ == {"shm_outputs"}
    source = (CORE / "worker/outputs.py").read_text()
    read = set(re.findall(r'wire(?:\.get\(|\[)"([a-z_]+)"', source))
    assert read == ExecuteRequest.__required_keys__ - {"priority"} | {"shm_outputs"}
