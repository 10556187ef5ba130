"""Model management of the ``pb_utils`` API (part of ``c_python_backend_utils``).

``get_model_dir`` and Triton's model loading API (``is_model_ready``,
``load_model``, ``unload_model``), asked of the server through the worker's BLS
client. Owns the per-instance context the backend installs with
:func:`_set_context`. Runs only inside a tritium worker hosting a ``python``
model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from python_backend_errors import TritonModelException

if TYPE_CHECKING:  # pragma: no cover
    from python_backend_context import InstanceContext

#: the most model-file bytes one ``load_model`` call carries (they travel in one frame to the core)
_MAX_FILES_BYTES = 128 * 1024 * 1024

#: the context of the model instance this worker hosts (set by the backend)
_context: InstanceContext | None = None


def _set_context(context: InstanceContext | None) -> None:
    global _context
    _context = context


def get_model_dir() -> str:
    """The folder of the model file (``<repository>/<model>/<version>``)."""
    if _context is None:
        raise TritonModelException("get_model_dir() is only available inside a model")
    return _context.model_dir


def _control(action: str, model_name: str, **arguments: Any) -> Any:
    """Send a model-control request to the server and wait for its answer (the BLS client's)."""
    from tritium.core.errors import TritonError as CoreError
    from tritium.core.worker import bls

    try:
        call = bls.client().control(action, model_name, **arguments)
    except CoreError as exc:
        raise TritonModelException(str(exc)) from None
    return call.result()


def _control_error(what: str, message: str) -> TritonModelException:
    """Triton's python backend words a refused load or unload this way."""
    instance = _context.instance_name if _context is not None else "<unknown>"
    return TritonModelException(
        f"Failed to {what} model: Failed to process the request for model '{instance}', message: {message}"
    )


def _check_str(function: str, signature: str, **values: Any) -> None:
    for value in values.values():
        if not isinstance(value, str):
            raise TypeError(
                f"{function}(): incompatible function arguments. The following argument types are "
                f"supported:\n    1. {signature}"
            )


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether version ``model_version`` of ``model_name`` ("": the version the policy serves) is
    ready (KServe model ready), asked of the server this model runs in.

    :raises TypeError: for arguments that are not strings (Triton's signature).
    :raises TritonModelException: for a version that is not a number (Triton's stub crashes).
    """
    _check_str(
        "is_model_ready",
        "(model_name: str, model_version: str = '') -> bool",
        model_name=model_name,
        model_version=model_version,
    )
    if model_version and not model_version.isdigit():
        raise TritonModelException(
            f"is_model_ready(): model_version must be a version number or '', got '{model_version}'"
        )
    response = _control("ready", model_name, version=model_version)
    if response.error is not None:
        raise TritonModelException(response.error.message)
    return bool(response.parameters.get("ready", False))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load, or reload, ``model_name`` on the server this model runs in (Triton's python backend
    model loading API), as ``POST /v2/repository/models/<name>/load`` does: explicit model control
    mode only; ``config`` a JSON model configuration that replaces ``config.pbtxt``; ``files``
    ``{"file:<path>": bytes}`` (a model that exists only in the request: needs ``config`` and
    the server's ``--model-load-allow-file-override``). Returns once the model is ready.

    :raises TypeError: for a name or config that is not a string (Triton's signature).
    :raises TritonModelException: when the server refuses or the load fails (its message).
    """
    _check_str(
        "load_model",
        "(model_name: str, config: str = '', files: object = None) -> None",
        model_name=model_name,
        config=config,
    )
    if files is not None and not isinstance(files, dict):
        raise TritonModelException("load_model(): 'files' must be a dict of 'file:<path>' -> bytes")
    total = sum(len(v) for v in (files or {}).values() if isinstance(v, (bytes, bytearray)))
    if total > _MAX_FILES_BYTES:
        raise TritonModelException(
            f"load_model(): the files come to {total} bytes, more than the {_MAX_FILES_BYTES} bytes "
            "one request can carry; place the model in the model repository instead"
        )
    response = _control("load", model_name, config=config, files=dict(files or {}))
    if response.error is not None:
        raise _control_error("load", response.error.message)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` from the server this model runs in, as ``POST
    /v2/repository/models/<name>/unload`` does (explicit mode only; a model that is not
    loaded is no error). Returns once the model takes no new requests.

    :raises TypeError: for a name that is not a string (Triton's signature).
    :raises TritonModelException: when the server refuses (its message).
    """
    _check_str("unload_model", "(model_name: str, unload_dependents: bool = False) -> None", model_name=model_name)
    response = _control("unload", model_name, unload_dependents=bool(unload_dependents))
    if response.error is not None:
        raise _control_error("unload", response.error.message)
