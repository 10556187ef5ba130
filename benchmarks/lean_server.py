#!/usr/bin/env python3
"""The minimal server plus what no request path can drop: a yardstick for ``benchmarks/headroom.py``.

``benchmarks/minimal_server.py`` bounds what tritium's process layout can
reach with no layers at all. This one adds back, each written the short way,
the work every request of tritium's must do, to show what a *lean* path could
reach while keeping it:

* **checks**: the JSON body's inputs against the model's signature (names,
  datatypes, shapes, element counts) and the requested outputs; a failed
  check is answered 400 with an ``{"error": ...}`` body;
* **shared memory**: input and output bytes lie in an arena shared by the
  core and the worker (fixed 4 KiB slots, each side allocating its own); frames
  carry ``[name, datatype, shape, offset, nbytes]`` descriptors, and the
  core hands output slots back with its next frame;
* **a scheduler**: one model instance, one batch in flight, a FIFO queue;
* **statistics**: success count and cumulative request, queue, compute input,
  compute infer and compute output times in nanoseconds, the worker's three
  measured by the worker;
* **model objects in the worker**: request, tensor and response objects
  like the python backend's, and the model's ``execute`` over them.

It serves the add_sub model only (FP32 [4] inputs ``INPUT0`` and ``INPUT1``;
``OUTPUT0`` = sum, ``OUTPUT1`` = difference).

Usage (loopback only)::

    python benchmarks/lean_server.py PORT
"""

from __future__ import annotations

import asyncio
import collections
import mmap
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any, cast

import msgspec
import numpy as np
import uvloop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minimal_server import HTTPReader, frame, read_frames, received_frames  # noqa: E402

SIGNATURE = {"INPUT0": ("FP32", [4]), "INPUT1": ("FP32", [4])}
OUTPUTS = ("OUTPUT0", "OUTPUT1")
SLOT_BYTES = 4096
SLOTS_PER_SIDE = 256  # the core's slots come first in the arena, then the worker's


class Slots:
    """Fixed-size blocks of one side of the arena: ``allocate`` gives an offset in bytes, ``free`` takes it back.

    :raises RuntimeError: from ``allocate`` when every slot is taken.
    """

    def __init__(self, first: int) -> None:
        self.free_offsets = [(first + i) * SLOT_BYTES for i in range(SLOTS_PER_SIDE)]

    def allocate(self) -> int:
        if not self.free_offsets:
            raise RuntimeError("arena full")
        return self.free_offsets.pop()

    def free(self, offset: int) -> None:
        self.free_offsets.append(offset)


# -- the worker -------------------------------------------------------------------------------


class Tensor:
    """A named numpy array, as the python backend's ``pb_utils.Tensor``."""

    __slots__ = ("name", "array")

    def __init__(self, name: str, array: np.ndarray) -> None:
        self.name = name
        self.array = array

    def as_numpy(self) -> np.ndarray:
        return self.array


class Request:
    """One inference request's input tensors, as the python backend's ``InferenceRequest``."""

    __slots__ = ("inputs",)

    def __init__(self, inputs: list[Tensor]) -> None:
        self.inputs = inputs

    def get_input_tensor_by_name(self, name: str) -> Tensor | None:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        return None


class Response:
    """A response's output tensors, as ``pb_utils.InferenceResponse``."""

    __slots__ = ("output_tensors",)

    def __init__(self, output_tensors: list[Tensor]) -> None:
        self.output_tensors = output_tensors


def execute(requests: Sequence[Request]) -> list[Response]:
    """The add_sub model, written as a python-backend ``execute``."""
    responses = []
    for request in requests:
        first = request.get_input_tensor_by_name("INPUT0")
        second = request.get_input_tensor_by_name("INPUT1")
        assert first is not None and second is not None
        a, b = first.as_numpy(), second.as_numpy()
        responses.append(Response([Tensor("OUTPUT0", a + b), Tensor("OUTPUT1", a - b)]))
    return responses


def run_worker(sock: socket.socket, arena: mmap.mmap) -> None:
    """Frames ``[id, inputs, released output offsets]`` in; ``[id, [input, infer, output] ns, outputs]`` out."""
    slots = Slots(SLOTS_PER_SIDE)
    for request_id, inputs, released in received_frames(sock):
        for offset in released:
            slots.free(offset)
        start = time.perf_counter_ns()
        tensors = [
            Tensor(name, np.frombuffer(arena, np.float32, nbytes // 4, offset).reshape(shape))
            for name, _datatype, shape, offset, nbytes in inputs
        ]
        computed = time.perf_counter_ns()
        (response,) = execute([Request(tensors)])
        executed = time.perf_counter_ns()
        outputs = []
        for tensor in response.output_tensors:
            array = np.ascontiguousarray(tensor.array, np.float32)
            offset = slots.allocate()
            arena[offset : offset + array.nbytes] = array.tobytes()
            outputs.append([tensor.name, "FP32", list(array.shape), offset, array.nbytes])
        done = time.perf_counter_ns()
        sock.sendall(frame([request_id, [computed - start, executed - computed, done - executed], outputs]))


# -- the core ---------------------------------------------------------------------------------


class Statistics:
    """Triton's per-model statistics, cumulative nanoseconds."""

    def __init__(self) -> None:
        self.success = 0
        self.request_ns = self.queue_ns = self.input_ns = self.infer_ns = self.output_ns = 0

    def record(self, request_ns: int, queue_ns: int, timings: Sequence[int]) -> None:
        self.success += 1
        self.request_ns += request_ns
        self.queue_ns += queue_ns
        self.input_ns += timings[0]
        self.infer_ns += timings[1]
        self.output_ns += timings[2]


class Pending:
    """A checked request waiting for, or in, the worker."""

    __slots__ = ("connection", "inputs", "start_ns", "queued_ns", "input_offsets")

    def __init__(self, connection: HTTPConnection, inputs: list[list[Any]], offsets: list[int], start: int) -> None:
        self.connection = connection
        self.inputs = inputs
        self.input_offsets = offsets
        self.start_ns = start
        self.queued_ns = 0  # set when it leaves the queue


class Scheduler(asyncio.Protocol):
    """The core's end of the worker socket: one instance, one request in flight, a FIFO queue behind it."""

    def __init__(self, arena: mmap.mmap) -> None:
        self.arena = arena
        self.slots = Slots(0)
        self.queue: collections.deque[Pending] = collections.deque()
        self.waiting: dict[int, Pending] = {}
        self.released: list[int] = []  # worker output slots the core is done with
        self.statistics = Statistics()
        self.next_id = 0
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def submit(self, pending: Pending) -> None:
        self.queue.append(pending)
        if not self.waiting:
            self._dispatch()

    def _dispatch(self) -> None:
        assert self.transport is not None
        pending = self.queue.popleft()
        pending.queued_ns = time.perf_counter_ns() - pending.start_ns
        self.next_id += 1
        self.waiting[self.next_id] = pending
        released, self.released = self.released, []
        self.transport.write(frame([self.next_id, pending.inputs, released]))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for request_id, timings, outputs in read_frames(self.buffer):
            pending = self.waiting.pop(request_id)
            for offset in pending.input_offsets:
                self.slots.free(offset)
            pending.connection.respond(self.arena, outputs)
            self.released.extend(offset for _name, _datatype, _shape, offset, _nbytes in outputs)
            self.statistics.record(time.perf_counter_ns() - pending.start_ns, pending.queued_ns, timings)
            if self.queue:
                self._dispatch()


_decoder = msgspec.json.Decoder()


def check(request: Any) -> str | None:
    """What is wrong with an add_sub request body (decoded JSON), or None."""
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        return "the request has no 'inputs' array"
    inputs = request["inputs"]
    if len(inputs) != len(SIGNATURE):
        return f"expected {len(SIGNATURE)} inputs but got {len(inputs)} inputs for model 'add_sub'"
    seen = set()
    for tensor in inputs:
        name = tensor.get("name") if isinstance(tensor, dict) else None
        if name not in SIGNATURE or name in seen:
            return f"unexpected inference input '{name}' for model 'add_sub'"
        seen.add(name)
        datatype, shape = SIGNATURE[name]
        if tensor.get("datatype") != datatype:
            return f"inference input '{name}' data-type is '{tensor.get('datatype')}', but model expects '{datatype}'"
        if tensor.get("shape") != shape:
            return f"unexpected shape for input '{name}' for model 'add_sub'"
        data = tensor.get("data")
        if not isinstance(data, list) or len(data) != shape[0]:
            return f"unexpected number of elements in input '{name}'"
    for output in request.get("outputs") or ():
        name = output.get("name") if isinstance(output, dict) else None
        if name not in OUTPUTS:
            return f"unexpected inference output '{name}' for model 'add_sub'"
    return None


class HTTPConnection(HTTPReader):
    """One client connection: every request is taken as an add_sub infer request."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__()
        self.scheduler = scheduler

    def on_message_complete(self) -> None:
        start = time.perf_counter_ns()
        try:
            request = _decoder.decode(self.take_body())
        except msgspec.DecodeError as exc:
            self.write_json(400, {"error": f"failed to parse the request JSON buffer: {exc}"})
            return
        problem = check(request)
        if problem is not None:
            self.write_json(400, {"error": problem})
            return
        scheduler = self.scheduler
        descriptors, offsets = [], []
        for tensor in request["inputs"]:
            offset = scheduler.slots.allocate()
            array = np.frombuffer(scheduler.arena, np.float32, 4, offset)
            try:
                array[:] = tensor["data"]
            except (TypeError, ValueError) as exc:
                for taken in (*offsets, offset):
                    scheduler.slots.free(taken)
                self.write_json(400, {"error": f"unable to parse 'data': {exc}"})
                return
            offsets.append(offset)
            descriptors.append([tensor["name"], "FP32", [4], offset, 16])
        scheduler.submit(Pending(self, descriptors, offsets, start))

    def respond(self, arena: mmap.mmap, outputs: list[list[Any]]) -> None:
        rendered = [
            {
                "name": name,
                "datatype": datatype,
                "shape": shape,
                "data": np.frombuffer(arena, np.float32, nbytes // 4, offset).tolist(),
            }
            for name, datatype, shape, offset, nbytes in outputs
        ]
        self.write_json(200, {"model_name": "add_sub", "model_version": "1", "outputs": rendered})


async def serve(port: int, core_end: socket.socket, arena: mmap.mmap) -> None:
    """Serve on 127.0.0.1:``port`` until killed."""
    loop = asyncio.get_running_loop()
    _, scheduler = await loop.create_connection(lambda: Scheduler(arena), sock=core_end)
    server = await loop.create_server(lambda: HTTPConnection(scheduler), "127.0.0.1", port)
    await server.serve_forever()


def main() -> None:
    port = int(sys.argv[1])
    arena = mmap.mmap(-1, 2 * SLOTS_PER_SIDE * SLOT_BYTES)  # anonymous and shared: the forked worker sees it
    core_end, worker_end = socket.socketpair()
    if os.fork() == 0:
        core_end.close()
        run_worker(worker_end, arena)
        os._exit(0)
    worker_end.close()
    uvloop.run(serve(port, core_end, arena))


if __name__ == "__main__":
    main()
