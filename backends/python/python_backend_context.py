"""The per-instance runtime interface the python backend's model-facing classes call.

``c_python_backend_utils`` (the ``pb_utils`` classes model code sees, defined
in its ``python_backend_*`` parts) talks to the instance that runs the model
only through this protocol; the backend (``libtriton_python.InstanceContext``)
implements it. Keeping the interface here lets the model-facing modules depend
on the runtime's contract without importing the backend module, which imports
them in turn.

Runs only inside a tritium worker process hosting a ``python`` model.
"""

from __future__ import annotations

from typing import Any, Protocol


class InstanceContext(Protocol):
    """One model instance of a python model, as the ``pb_utils`` classes use it.

    Attributes: ``model_name``/``model_version``/``instance_name`` (the names
    Triton reports), ``model_dir`` (the version folder holding ``model.py``),
    ``decoupled`` (``model_transaction_policy.decoupled``), ``output_names``
    (the config's outputs, in order), ``input_types`` (input name -> KServe
    datatype such as ``"FP32"`` or ``"BYTES"``).
    """

    model_name: str
    model_version: int
    instance_name: str
    model_dir: str
    decoupled: bool
    output_names: list[str]
    input_types: dict[str, str]

    def send(self, request: Any, response: Any, final: bool) -> None:
        """Send ``response`` (a ``pb_utils.InferenceResponse``; ``None``: none) for ``request``; ``final`` closes its stream."""

    def send_error(self, request: Any, message: str, final: bool = True) -> None:
        """Answer ``request`` with an error response carrying ``message``."""

    def abandoned(self, request: Any) -> None:
        """``request``'s response sender was dropped without the final flag: close its stream."""
