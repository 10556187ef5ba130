"""Implicit state (``sequence_batching { state [...] }``) with framework backends, black-box.

A stateful ONNX model (onnxruntime), a TorchScript one (pytorch) and an
OpenVINO IR (openvino) keep
``state' = 0.5 * state + x`` in the server and answer ``y = 2 * state'``; the
state output is not one of the config's outputs. Two sequences are driven
interleaved, over HTTP and gRPC, with and without requested outputs (the usual
call names none), and every answer must equal the model file run step by step
in this process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support import framework_models as fm
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

STATE = """
sequence_batching {{
  max_sequence_idle_microseconds: 10000000
  state [ {{
    input_name: "{state_in}" output_name: "{state_out}" data_type: TYPE_FP32 dims: [ 2 ]
    initial_state {{ data_type: TYPE_FP32 dims: [ 2 ] zero_data: true name: "zeros" }}
  }} ]
}}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

MODELS = {
    # model name -> (input, output, state input, state output)
    "state_onnx": ("INPUT", "OUTPUT", "STATE_IN", "STATE_OUT"),
    "state_torch": ("INPUT__0", "OUTPUT__0", "STATE_IN__1", "STATE_OUT__1"),
    "state_openvino": ("INPUT", "OUTPUT", "STATE_IN", "STATE_OUT"),
}
BACKENDS = {"state_onnx": "onnxruntime", "state_torch": "pytorch", "state_openvino": "openvino"}


def build(repo: Path) -> None:
    for name, (inp, out, state_in, state_out) in MODELS.items():
        backend = BACKENDS[name]
        config = (
            f'backend: "{backend}"\nmax_batch_size: 4\n'
            f'input [ {{ name: "{inp}" data_type: TYPE_FP32 dims: [ 2 ] }} ]\n'
            f'output [ {{ name: "{out}" data_type: TYPE_FP32 dims: [ 2 ] }} ]\n'
            + STATE.format(state_in=state_in, state_out=state_out)
        )
        add_model(repo, name, config)
    fm.stateful_onnx(repo / "state_onnx" / "1" / "model.onnx")
    fm.stateful_torchscript(repo / "state_torch" / "1" / "model.pt")
    fm.stateful_onnx(repo / "state_openvino" / "stateful.onnx")
    fm.openvino_ir(repo / "state_openvino" / "stateful.onnx", repo / "state_openvino" / "1" / "model.xml")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("implicit_state"), build, [])


def _reference(server: ServerProcess, model: str):
    """``step(x, state) -> (y, new state)`` running the model file in this process."""
    path = Path(server.repositories[0]) / model / "1"
    if model == "state_onnx":
        import onnxruntime as ort

        session = ort.InferenceSession(str(path / "model.onnx"), providers=["CPUExecutionProvider"])
        return lambda x, s: tuple(session.run(["OUTPUT", "STATE_OUT"], {"INPUT": x, "STATE_IN": s}))
    if model == "state_openvino":
        from tritium.backends.openvino.libtriton_openvino import import_openvino

        ov = import_openvino()

        compiled = ov.Core().compile_model(str(path / "model.xml"), "CPU")
        return lambda x, s: tuple(
            np.asarray(compiled({"INPUT": x, "STATE_IN": s})[compiled.output(n)]) for n in ("OUTPUT", "STATE_OUT")
        )
    module = fm.load_torchscript(path / "model.pt")
    return lambda x, s: tuple(t.numpy() for t in module(torch.from_numpy(x), torch.from_numpy(s)))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_interleaved_sequences_carry_state_with_and_without_requested_outputs(
    server: ServerProcess, model: str, protocol: str
) -> None:
    inp, out, _state_in, state_out = MODELS[model]
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    step = _reference(server, model)
    rng = np.random.default_rng(7)
    sequences = {1001: np.zeros((1, 2), np.float32), 1002: np.zeros((1, 2), np.float32)}
    steps = 4
    try:
        for n in range(steps):
            for seq_id in sequences:
                x = rng.standard_normal((1, 2)).astype(np.float32)
                expected, sequences[seq_id] = step(x, sequences[seq_id])
                tensor = module.InferInput(inp, [1, 2], "FP32")
                tensor.set_data_from_numpy(x)
                # the usual call names no outputs; every other step names the output explicitly
                outputs = [module.InferRequestedOutput(out)] if (n + seq_id) % 2 else None
                result = client.infer(
                    model,
                    [tensor],
                    outputs=outputs,
                    sequence_id=seq_id,
                    sequence_start=n == 0,
                    sequence_end=n == steps - 1,
                )
                np.testing.assert_allclose(result.as_numpy(out), expected, rtol=1e-6, atol=1e-6)
                assert result.as_numpy(state_out) is None  # the state stays in the server
    finally:
        client.close()
