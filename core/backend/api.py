"""Backend API v1 (Python): the objects a backend's ``TRITONBACKEND_*`` functions receive.

A Python backend is a module ``libtriton_<name>.py`` (or a package
``libtriton_<name>/``) that defines these functions; every one but
``TRITONBACKEND_ModelInstanceExecute`` is optional. They mirror the entry
points of Triton's ``tritonbackend.h`` and all run **in a worker process**,
which may host the instances of many models of the backend (Triton too runs a
backend's instances of every model in one process), each instance on a thread
of its own:

==========================================  ========================================
function                                    when
==========================================  ========================================
``TRITONBACKEND_Initialize(backend)``       once per worker, before anything else
``TRITONBACKEND_ModelInitialize(model)``    once per model per worker, after
                                            Initialize; may complete the model config
                                            (auto-complete)
``TRITONBACKEND_ModelInstanceInitialize``   ``(instance)``, once per instance, on its thread
``TRITONBACKEND_ModelInstanceExecute``      ``(instance, requests)`` for each batch, on the
                                            instance's thread: instances of different
                                            models (or of one) execute at the same time
``TRITONBACKEND_ModelInstanceFinalize``     ``(instance)``, at unload or shutdown
``TRITONBACKEND_ModelFinalize(model)``      after its last instance in the worker is
                                            finalized
``TRITONBACKEND_Finalize(backend)``         last, before the worker exits
==========================================  ========================================

Module globals are shared by every model the worker hosts: keep per-model and
per-instance state on :attr:`Model.state` and :attr:`ModelInstance.state`. A
failed initialize is followed by the matching finalize, as in Triton.

A function that raises :class:`~tritium.core.errors.TritonError` (or any
exception) fails that step: a failed initialize fails the model load with the
message; a failed execute fails every request of the batch that has not
received its final response yet. The worker keeps running.

Tensors are numpy arrays. Inputs are read-only views of the shared-memory
arena (no copy); BYTES tensors are object arrays of ``bytes``; BF16 tensors
are ``uint16`` arrays holding the raw bfloat16 bits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ..errors import Code, TritonError
from ..model.instance_groups import passive_instances

__all__ = [
    "API_VERSION",
    "Backend",
    "Model",
    "ModelInstance",
    "Request",
    "ResponseSink",
    "TritonError",
    "Code",
    "batch_input",
]

#: (major, minor) of this API; a backend may define ``TRITONBACKEND_API_VERSION``
#: and the loader refuses one whose major differs.
API_VERSION = (1, 0)


class Backend:
    """A loaded backend (one per backend library per worker).

    :ivar name: the backend name (``"onnxruntime"``).
    :ivar directory: the folder the backend library was loaded from.
    :ivar config: settings given with ``--backend-config=<name>,<key>=<value>``.
    :ivar state: free for the backend to use.
    """

    def __init__(self, name: str, directory: str, config: Mapping[str, str]) -> None:
        self.name = name
        self.directory = directory
        self.config: dict[str, str] = dict(config)
        self.state: Any = None

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"


class Model:
    """A model a worker serves (one object for all its instances in that worker).

    :ivar name: model name.
    :ivar version: model version (an integer).
    :ivar config: the model configuration as a dict in the JSON form of
        Triton's ``ModelConfig`` (proto field names: ``max_batch_size``,
        ``input[i]["data_type"] == "TYPE_FP32"``, ``dims`` as ints, ...).
    :ivar repository_path: the model's folder (``<repository>/<model>``).
    :ivar version_path: the version folder (``<repository>/<model>/<version>``).
    :ivar backend: the :class:`Backend`.
    :ivar auto_complete_config: True when the backend may complete the
        configuration in ``TRITONBACKEND_ModelInitialize`` (Triton's
        auto-complete; off with ``--disable-auto-complete-config``).
    :ivar state: free for the backend to use.
    """

    def __init__(
        self,
        name: str,
        version: int,
        config: dict[str, Any],
        repository_path: str,
        backend: Backend,
        auto_complete_config: bool,
    ) -> None:
        self.name = name
        self.version = version
        self.config = config
        self.repository_path = repository_path
        self.version_path = f"{repository_path}/{version}"
        self.backend = backend
        self.auto_complete_config = auto_complete_config
        self.state: Any = None
        self._config_changed = False

    def set_config(self, config: dict[str, Any]) -> None:
        """Replace the model configuration (auto-complete).

        Only allowed during ``TRITONBACKEND_ModelInitialize`` and only when
        :attr:`auto_complete_config` is True; the core validates the result.

        :raises TritonError: UNSUPPORTED when auto-complete is disabled.
        """
        if not self.auto_complete_config:
            raise TritonError(Code.UNSUPPORTED, f"model '{self.name}': auto-complete of the config is disabled")
        self.config = config
        self._config_changed = True

    def parameter(self, key: str, default: str | None = None) -> str | None:
        """The ``string_value`` of config ``parameters[key]``, or ``default``."""
        value = self.config.get("parameters", {}).get(key)
        if isinstance(value, dict):
            return str(value.get("string_value", default))
        return default

    def __repr__(self) -> str:
        return f"Model({self.name!r}, version={self.version})"


class ModelInstance:
    """A model instance a worker hosts (it executes on a thread of its own there).

    :ivar name: Triton's instance name, ``<group name>_<index>`` (``"m_0_0"``).
    :ivar kind: ``"KIND_CPU"`` or ``"KIND_GPU"``.
    :ivar device_id: GPU id for KIND_GPU, else 0.
    :ivar model: the :class:`Model`.
    :ivar state: free for the backend to use.
    """

    def __init__(self, name: str, kind: str, device_id: int, model: Model) -> None:
        self.name = name
        self.kind = kind
        self.device_id = device_id
        self.model = model
        self.state: Any = None

    @property
    def passive(self) -> bool:
        """Whether the instance's group is ``passive: true`` (Triton's ``TRITONBACKEND_ModelInstanceIsPassive``).

        The scheduler gives a passive instance no requests; the backend may use it on its own.
        """
        return self.name in passive_instances(self.model.config)

    def __repr__(self) -> str:
        return f"ModelInstance({self.name!r}, {self.kind}, device {self.device_id})"


class ResponseSink(Protocol):
    """What a :class:`Request` sends its responses through (the worker implements it)."""

    def send_response(
        self,
        request: Request,
        outputs: Mapping[str, np.ndarray] | None,
        error: TritonError | None,
        parameters: Mapping[str, Any] | None,
        final: bool,
    ) -> None: ...

    def output_buffer(self, request: Request, datatype: str, shape: Sequence[int]) -> np.ndarray: ...

    def reschedule(self, request: Request) -> None: ...

    def is_cancelled(self, request: Request) -> bool: ...


class Request:
    """One inference request in a batch given to ``TRITONBACKEND_ModelInstanceExecute``.

    :ivar id: the request id the client gave ("" when none).
    :ivar correlation_id: the sequence correlation id (0 when none; int or str).
    :ivar flags: sequence flags (1 = START, 2 = END, as Triton's
        ``TRITONSERVER_REQUEST_FLAG_SEQUENCE_*``).
    :ivar parameters: request parameters (``{"key": bool | int | float | str}``).
    :ivar inputs: input tensors by name (read-only numpy arrays, shapes as sent,
        batch dimension included when the model batches).
    :ivar requested_output_names: the outputs the client asked for; empty
        means all outputs of the model.
    :ivar timeout_us: the request's ``timeout`` parameter in microseconds (0: none).

    The server's own request parameters (``sequence_id``, ``sequence_start``,
    ``sequence_end``, ``priority``, ``timeout``) arrive as the attributes
    above, not in :attr:`parameters`, as in Triton.
    """

    __slots__ = (
        "id",
        "correlation_id",
        "flags",
        "timeout_us",
        "parameters",
        "inputs",
        "requested_output_names",
        "_sink",
        "_final_sent",
        "_token",
    )

    def __init__(
        self,
        id: str,
        correlation_id: int | str,
        flags: int,
        parameters: dict[str, Any],
        inputs: dict[str, np.ndarray],
        requested_output_names: list[str],
        sink: ResponseSink,
        token: Any = None,
        timeout_us: int = 0,
    ) -> None:
        self.id = id
        self.correlation_id = correlation_id
        self.flags = flags
        self.timeout_us = timeout_us
        self.parameters = parameters
        self.inputs = inputs
        self.requested_output_names = requested_output_names
        self._sink = sink
        self._final_sent = False
        self._token = token

    def input(self, name: str) -> np.ndarray:
        """The input tensor ``name``.

        :raises TritonError: INVALID_ARG when the request has no such input.
        """
        try:
            return self.inputs[name]
        except KeyError:
            raise TritonError(Code.INVALID_ARG, f"request has no input '{name}'") from None

    def is_output_requested(self, name: str) -> bool:
        """True when the client wants output ``name`` (all outputs when it named none)."""
        return not self.requested_output_names or name in self.requested_output_names

    def output_buffer(self, name: str, datatype: str, shape: Sequence[int]) -> np.ndarray:
        """A writable array in shared memory for output ``name`` (like ``TRITONBACKEND_OutputBuffer``).

        Fill it and pass it to :meth:`respond`: it then goes to the client
        without another copy. Not for BYTES.

        :param datatype: KServe datatype name (``"FP32"``).
        :param shape: the output shape.
        :raises TritonError: INVALID_ARG for BYTES or an unknown datatype.
        """
        del name  # the buffer is tied to the request, not the name
        return self._sink.output_buffer(self, datatype, shape)

    def respond(
        self,
        outputs: Mapping[str, np.ndarray] | None = None,
        *,
        error: TritonError | None = None,
        parameters: Mapping[str, Any] | None = None,
        final: bool = True,
    ) -> None:
        """Send a response (like ``TRITONBACKEND_ResponseSend``).

        A model that is not decoupled sends exactly one response per request,
        final (the default). A decoupled model sends any number with
        ``final=False`` and ends with ``final=True`` (outputs optional).
        Outputs the client did not request are dropped here.

        :param outputs: output tensors by name (numpy arrays; object arrays of
            bytes/str for BYTES).
        :param error: send an error response instead (outputs ignored).
        :param parameters: response parameters (``{"key": bool | int | float | str}``).
        :raises TritonError: INTERNAL when the request already got its final response.
        """
        if self._final_sent:
            raise TritonError(Code.INTERNAL, f"request '{self.id}' already received its final response")
        if final:
            self._final_sent = True
        self._sink.send_response(self, outputs, error, parameters, final)

    def reschedule(self) -> None:
        """Release the request to run again (``TRITONBACKEND_RequestRelease`` with
        ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``), instead of its final response.

        Only a model with ``sequence_batching { iterative_sequence: true }``
        reschedules: the sequence batcher runs the same request again, next in
        its sequence, with its sequence flags cleared (0). Any other model
        answers the request with an error (``Request is released with
        TRITONSERVER_REQUEST_RELEASE_RESCHEDULE ...``). A decoupled model may
        have sent responses without the final flag first; a model that is not
        decoupled sends none in a run it reschedules. After this call the
        request is :attr:`completed` for this execution.

        :raises TritonError: INTERNAL when the request already received its final response.
        """
        if self._final_sent:
            raise TritonError(Code.INTERNAL, f"request '{self.id}' already received its final response")
        self._final_sent = True
        self._sink.reschedule(self)

    def is_cancelled(self) -> bool:
        """True once the client cancelled the request (``TRITONBACKEND_RequestIsCancelled``).

        A gRPC call the client cancelled or whose deadline passed, a gRPC stream
        cancelled, or an HTTP client that closed its connection (Triton 2.51 does not
        report the last): the model may stop early and answer with what it has, or
        with an error. Reads shared memory only: cheap enough to call in a loop, from
        any thread.
        """
        return self._sink.is_cancelled(self)

    @property
    def completed(self) -> bool:
        """True once the final response was sent (or the request was rescheduled)."""
        return self._final_sent

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, inputs={list(self.inputs)})"


def batch_input(requests: Sequence[Request], name: str) -> np.ndarray:
    """Input ``name`` of every request of a batch as one array (concatenated along dim 0).

    The dynamic batcher lays a batch's inputs out contiguously in shared
    memory, so this is normally a read-only view spanning all the requests'
    arrays: no copy. It copies (``numpy.concatenate``) only when the arrays are
    not adjacent, e.g. ragged shapes or a batch formed elsewhere.

    :param requests: the requests given to ``TRITONBACKEND_ModelInstanceExecute``.
    :param name: the input name.
    :returns: an array of shape ``[sum of the requests' dim 0, *rest]``.
    :raises TritonError: INVALID_ARG when a request lacks the input.
    """
    arrays = [r.input(name) for r in requests]
    first = arrays[0]
    if len(arrays) == 1:
        return first
    if first.dtype != object and first.ndim > 0 and all(a.flags.c_contiguous for a in arrays):
        rest = first.shape[1:]
        address = first.__array_interface__["data"][0]
        contiguous = True
        expected = address
        for a in arrays:
            if a.dtype != first.dtype or a.shape[1:] != rest or a.__array_interface__["data"][0] != expected:
                contiguous = False
                break
            expected += a.nbytes
        if contiguous:
            total = sum(int(a.shape[0]) for a in arrays)
            view = np.lib.stride_tricks.as_strided(first, shape=(total, *rest), strides=first.strides, writeable=False)
            return view
    return np.concatenate(arrays, axis=0)
