"""The pytorch backend, black-box: TorchScript and torch.export models served over HTTP and gRPC.

Tiny models are built in the test (``tests/support/framework_models.py``) and
their answers compared with the same module run in this process. The real
TorchScript examples (EfficientNet-Lite0, MiniLM) are in ``test_framework_examples.py``.
"""

from __future__ import annotations

import concurrent.futures
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import framework_models as fm
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

ADD_SUB_IO = """
    input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


#: the size of the weighty models' weight (MiB): two copies or one show in their worker's memory
WEIGHT_MIB = 48


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def _model(repo: Path, name: str, config: str, build, filename: str = "model.pt") -> None:
    add_model(repo, name, config)
    build(repo / name / "1" / filename)


def build(repo: Path) -> None:
    _model(
        repo,
        "pt_add_sub",
        f"""
        platform: "pytorch_libtorch"
        max_batch_size: 8
        {ADD_SUB_IO}
        dynamic_batching {{ max_queue_delay_microseconds: 300000 }}
        """
        + _param("INFERENCE_MODE", "false")
        + _param("DISABLE_OPTIMIZED_EXECUTION", "true")
        + _param("INTRA_OP_THREAD_COUNT", "1")
        + _param("INTER_OP_THREAD_COUNT", "1")
        + _param("ENABLE_CACHE_CLEANING", "true"),
        fm.add_sub_torchscript,
    )
    _model(
        repo,
        "pt_named",
        """
        backend: "pytorch"
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "scale" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
        fm.named_torchscript,
    )
    _model(
        repo,
        "pt_config_order",
        """
        backend: "pytorch"
        input [ { name: "first" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "second" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "sum" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "diff" data_type: TYPE_FP32 dims: [ 2 ] } ]
        instance_group [ { count: 2 kind: KIND_CPU } ]
        """,
        fm.add_sub_torchscript,
    )
    _model(
        repo,
        "pt_dict",
        """
        backend: "pytorch"
        max_batch_size: 4
        input [ { name: "A" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
        """,
        fm.dict_torchscript,
    )
    _model(
        repo,
        "pt_strings",
        """
        backend: "pytorch"
        input [ { name: "TEXT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "LENGTH__0" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "UPPER__1" data_type: TYPE_STRING dims: [ -1 ] } ]
        """,
        fm.strings_torchscript,
    )
    _model(
        repo,
        "pt_raise",
        """
        backend: "pytorch"
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
        """,
        fm.raising_torchscript,
    )
    _model(repo, "pt_exported", 'backend: "pytorch"\n', fm.exported_program, "model.pt2")
    # load errors: the naming rules, parameters, files
    _model(
        repo,
        "bad_count",
        """
        backend: "pytorch"
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT__2" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
        fm.add_sub_torchscript,
    )
    for name, key, value in (
        ("bad_nvfuser", "ENABLE_NVFUSER", "true"),
        ("bad_bool", "INFERENCE_MODE", "maybe"),
        ("bad_threads", "INTRA_OP_THREAD_COUNT", "two"),
    ):
        _model(
            repo,
            name,
            f'backend: "pytorch"\nmax_batch_size: 8\n{ADD_SUB_IO}' + _param(key, value),
            fm.add_sub_torchscript,
        )
    add_model(
        repo,
        "bad_file",
        f'backend: "pytorch"\nmax_batch_size: 8\n{ADD_SUB_IO}',
        files={"1/model.pt": "not a TorchScript archive"},
    )
    add_model(repo, "bad_missing", f'backend: "pytorch"\nmax_batch_size: 8\n{ADD_SUB_IO}')
    for name, sharing in (("weights_shared", "true"), ("weights_own", "false")):  # each in a worker of its own
        _model(
            repo,
            name,
            """
            backend: "pytorch"
            input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
            instance_group [ { count: 2 kind: KIND_CPU } ]
            """
            + _param("ENABLE_WEIGHT_SHARING", sharing)
            + _param("worker_isolation", "model"),
            lambda path: fm.weighty_torchscript(path, WEIGHT_MIB),
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(
        tmp_path_factory.mktemp("pytorch"),
        build,
        ["--exit-on-error=false", "--model-control-mode=explicit", "--load-model=*"],
    )


def _infer(server: ServerProcess, protocol: str, model: str, inputs: dict[str, np.ndarray], outputs=None):
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    tensors = []
    for name, array in inputs.items():
        datatype = "BYTES" if array.dtype == object else {"float32": "FP32", "int64": "INT64"}[array.dtype.name]
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    requested = [module.InferRequestedOutput(n) for n in outputs] if outputs else None
    try:
        return client.infer(model, tensors, outputs=requested)
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_named_index_inputs_and_outputs_match_torch_in_process(server: ServerProcess, protocol: str) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, np.float32)
    result = _infer(server, protocol, "pt_add_sub", {"INPUT__0": a, "INPUT__1": b})
    module = fm.load_torchscript(server.repositories[0] + "/pt_add_sub/1/model.pt")
    total, diff = (t.numpy() for t in module(torch.from_numpy(a), torch.from_numpy(b)))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), total)  # OUTPUT__0: position 0, listed second
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), diff)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_forward_argument_names_config_order_and_dict_input(server: ServerProcess, protocol: str) -> None:
    x = np.array([1, 2, 3], np.float32)
    named = _infer(server, protocol, "pt_named", {"x": x, "scale": np.array([3], np.float32)})
    np.testing.assert_array_equal(named.as_numpy("y"), x * 3 + 1)  # by name, though the config lists x first
    first, second = np.array([5, 7], np.float32), np.array([1, 2], np.float32)
    ordered = _infer(server, protocol, "pt_config_order", {"second": second, "first": first})
    np.testing.assert_array_equal(ordered.as_numpy("sum"), first + second)
    np.testing.assert_array_equal(ordered.as_numpy("diff"), first - second)  # config order: first is a
    a, b = np.array([[1, 2]], np.float32), np.array([[3, 4]], np.float32)
    np.testing.assert_array_equal(_infer(server, protocol, "pt_dict", {"A": a, "B": b}).as_numpy("OUT"), a * 10 + b)


def test_bytes_inputs_arrive_as_a_list_of_str(server: ServerProcess) -> None:
    texts = np.array(["héllo".encode(), b"ab", b""], dtype=object)
    result = _infer(server, "http", "pt_strings", {"TEXT__0": texts})
    module = fm.load_torchscript(server.repositories[0] + "/pt_strings/1/model.pt")
    lengths, upper = module(["héllo", "ab", ""])
    assert result.as_numpy("LENGTH__0").tolist() == lengths.tolist() == [6, 2, 0]  # TorchScript counts UTF-8 bytes
    assert result.as_numpy("UPPER__1").tolist() == [t.encode() for t in upper] == ["HéLLO".encode(), b"AB", b""]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_torchscript_exception_is_the_request_error_with_its_traceback(server: ServerProcess, protocol: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        _infer(server, protocol, "pt_raise", {"INPUT__0": np.array([1, -1], np.float32)})
    message = info.value.message()
    assert message.startswith("PyTorch execute failure: The following operation failed in the TorchScript interpreter.")
    assert "x must be non-negative" in message and "Traceback of TorchScript" in message
    ok = _infer(server, protocol, "pt_raise", {"INPUT__0": np.array([4, 9], np.float32)})  # still serving
    np.testing.assert_array_equal(ok.as_numpy("OUTPUT__0"), [2, 3])


def test_a_dynamic_batch_runs_as_one_call_and_returns_each_its_rows(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("pt_add_sub")["model_stats"][0]
    sizes = [1, 3, 2, 1]
    rng = np.random.default_rng(0)
    batches = [
        (rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32)) for n in sizes
    ]
    with concurrent.futures.ThreadPoolExecutor(len(sizes)) as pool:
        results = list(
            pool.map(lambda ab: _infer(server, "http", "pt_add_sub", {"INPUT__0": ab[0], "INPUT__1": ab[1]}), batches)
        )
    for (a, b), result in zip(batches, results):
        np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), a - b)
    after = client.get_inference_statistics("pt_add_sub")["model_stats"][0]
    assert int(after["inference_count"]) - int(before["inference_count"]) == sum(sizes)
    assert int(after["execution_count"]) - int(before["execution_count"]) < len(sizes)  # batched together


def test_exported_program_completes_its_config_and_batches(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("pt_exported")
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("x", "TYPE_FP32", [4]),
        ("y", "TYPE_FP32", [4]),
    ]
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("output__0", [4]), ("output__1", [1])]
    x = np.array([[-1, 2, -3, 4], [1, 1, 1, 1], [0, 5, 0, 5]], np.float32)
    y = np.full((3, 4), 2, np.float32)
    result = _infer(server, "grpc", "pt_exported", {"x": x, "y": y})
    program = torch.export.load(server.repositories[0] + "/pt_exported/1/model.pt2").module()
    product, total = (t.numpy() for t in program(torch.from_numpy(x), torch.from_numpy(y)))
    np.testing.assert_array_equal(result.as_numpy("output__0"), product)
    # output__1 is [batch] in the program: the completed config gives it dims [1] with
    # reshape { shape: [] }, so the client gets [batch, 1], the config's shape (as in Triton)
    np.testing.assert_array_equal(result.as_numpy("output__1"), total.reshape(3, 1))


def test_two_instances_share_the_backends_worker_and_serve(server: ServerProcess) -> None:
    """count: 2 gives two instances, both in the pytorch backend's shared worker (with the
    other pytorch models), each on its own thread there; a reload places the new ones there too."""
    assert server.proc is not None
    client = httpclient.InferenceServerClient(server.http_url)
    pids = server.instance_pids("pt_config_order")
    assert sorted(pids) == ["pt_config_order_0_0", "pt_config_order_0_1"]
    [worker] = set(pids.values())
    assert set(server.instance_pids("pt_dict").values()) == {worker}
    client.unload_model("pt_config_order")
    client.load_model("pt_config_order")
    assert set(server.instance_pids("pt_config_order").values()) == {worker}
    first, second = np.ones((2,), np.float32), np.full((2,), 3, np.float32)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(lambda _: _infer(server, "http", "pt_config_order", {"first": first, "second": second}), range(4))
        )
    for result in results:
        np.testing.assert_array_equal(result.as_numpy("sum"), first + second)


def _pss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no Pss in /proc/{pid}/smaps_rollup")


def test_weight_sharing_keeps_one_copy_of_the_weights_for_the_instances_of_a_worker(server: ServerProcess) -> None:
    """ENABLE_WEIGHT_SHARING: the two instances of ``weights_shared`` use one loaded module; those of
    ``weights_own`` one each: their workers (a worker per model here) differ by about one copy."""
    shared, own = (set(server.instance_pids(m).values()) for m in ("weights_shared", "weights_own"))
    assert len(shared) == 1 and len(own) == 1 and shared != own
    difference = _pss_mib(own.pop()) - _pss_mib(shared.pop())
    assert WEIGHT_MIB * 0.75 < difference < WEIGHT_MIB * 1.5, difference
    x = np.arange(4, dtype=np.float32)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # both instances of each answer
        for model in ("weights_shared", "weights_own"):
            results = pool.map(lambda _, m=model: _infer(server, "grpc", m, {"x": x}).as_numpy("y"), range(8))
            for result in results:
                np.testing.assert_array_equal(result, x + 1.5)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "bad_count",
            "Invalid argument: unable to load model 'bad_count', configuration expects 3 inputs, model provides 2",
        ),
        (
            "bad_nvfuser",
            "Unsupported: unable to load model 'bad_nvfuser': the pytorch backend does not support parameter "
            "'ENABLE_NVFUSER': torch 2 removed nvfuser (use ENABLE_TENSOR_FUSER)",
        ),
        ("bad_bool", "failed to convert 'INFERENCE_MODE' of model 'bad_bool' to a boolean: 'maybe'"),
        ("bad_threads", "failed to convert 'INTRA_OP_THREAD_COUNT' of model 'bad_threads' to an integer: 'two'"),
        ("bad_file", "Internal: failed to load model 'bad_file': PytorchStreamReader failed reading zip archive"),
        ("bad_missing", "Not found: unable to find '"),
    ],
)
def test_load_errors_name_the_input_and_the_rule(server: ServerProcess, model: str, message: str) -> None:
    assert f"failed to load '{model}' version 1: " in server.log()
    line = next(line for line in server.log().splitlines() if f"failed to load '{model}' version 1: " in line)
    assert message in line
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready(model)
    assert client.is_model_ready("pt_add_sub")  # the others keep serving


def test_missing_torch_is_a_clear_load_error(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "needs_torch", f'backend: "pytorch"\nmax_batch_size: 8\n{ADD_SUB_IO}', files={"1/model.pt": "x"})
    add_model(
        repo,
        "identity",
        textwrap.dedent("""
        backend: "identity"
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
    """),
    )
    server = ServerProcess(
        [repo], ["--exit-on-error=false"], log_path=tmp_path / "server.log", env=fm.without_package(tmp_path, "torch")
    )
    server.start()
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_model_ready("identity") and not client.is_model_ready("needs_torch")
        assert (
            "failed to load 'needs_torch' version 1: Unavailable: the pytorch backend needs the torch package: "
            "pip install 'tritium[pytorch]' (No module named 'torch')"
        ) in server.log()
    finally:
        server.stop()
