"""Model execution environments (``EXECUTION_ENV_PATH``): a model runs in its own Python environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.repo import add_model

# A backend that needs a package the server's environment does not have (tabulate).
TABLE_BACKEND = """
import sys
import numpy as np
import tabulate

def TRITONBACKEND_ModelInstanceExecute(instance, requests):
    for request in requests:
        table = tabulate.tabulate([request.input("INPUT0").tolist()], tablefmt="plain")
        request.respond({"OUTPUT0": np.array([table.encode(), sys.prefix.encode()], dtype=object)})
"""


def config(env: str) -> str:
    return f"""
        backend: "table"
        max_batch_size: 0
        input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
        output [ {{ name: "OUTPUT0" data_type: TYPE_STRING dims: [ 2 ] }} ]
        parameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env}" }} }}
    """


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment (interpreter copied, so it can be packed) with numpy and tabulate."""
    with pytest.raises(ImportError):
        __import__("tabulate")  # the point: the server's environment lacks it
    env = tmp_path_factory.mktemp("envs") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--copies", str(env)], check=True, timeout=300)
    subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "numpy<2", "tabulate"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return env


def infer(server) -> list[str]:
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [2], "INT32")
    inp.set_data_from_numpy(np.array([1, 2], dtype=np.int32))
    return [x.decode() for x in client.infer("m", [inp]).as_numpy("OUTPUT0")]


def test_a_model_runs_in_its_own_virtual_environment(environment, tmp_path, start_server):
    repo = tmp_path / "repo"
    model = add_model(repo, "m", config("$$TRITON_MODEL_DIRECTORY/env"), files={"libtriton_table.py": TABLE_BACKEND})
    shutil.copytree(environment, model / "env", symlinks=True)
    table, prefix = infer(start_server([repo]))
    assert table == "1  2"
    assert prefix == str(model / "env")


def test_a_packed_environment_is_unpacked_once_into_the_cache(environment, tmp_path, start_server, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(cache))
    repo = tmp_path / "repo"
    model = add_model(
        repo, "m", config("$$TRITON_MODEL_DIRECTORY/env.tar.gz"), files={"libtriton_table.py": TABLE_BACKEND}
    )
    with tarfile.open(model / "env.tar.gz", "w:gz") as tar:
        tar.add(environment, arcname="env")
    table, prefix = infer(start_server([repo]))
    assert table == "1  2"
    [unpacked] = list((cache / "environments").iterdir())
    assert prefix == str(unpacked / "env")
    infer(start_server([repo]))  # a second server reuses the unpacked copy
    assert list((cache / "environments").iterdir()) == [unpacked]


def test_environment_errors_fail_the_model_clearly(tmp_path, start_server):
    repo = tmp_path / "repo"
    outside = tmp_path / "outside_env"
    outside.mkdir()
    add_model(repo, "escapes", config(str(outside)).replace('"table"', '"identity"'))
    add_model(repo, "missing", config("$$TRITON_MODEL_DIRECTORY/nope").replace('"table"', '"identity"'))
    bare = add_model(repo, "no_numpy", config("$$TRITON_MODEL_DIRECTORY/bare").replace('"table"', '"identity"'))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare / "bare")], check=True, timeout=300)
    log = start_server([repo], ["--exit-on-error=false"]).log()
    assert f"model 'escapes': EXECUTION_ENV_PATH '{outside}' leaves the model repository" in log
    assert "model 'missing': execution environment '$$TRITON_MODEL_DIRECTORY/nope' does not exist" in log
    assert (
        "model 'no_numpy': the execution environment '$$TRITON_MODEL_DIRECTORY/bare' cannot run a tritium worker "
        "(it needs Python >= 3.10 and numpy): ModuleNotFoundError: No module named 'numpy'"
    ) in log


PYTHON_MODEL = """
import sys
import numpy as np
import tabulate
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            row = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().tolist()
            table = tabulate.tabulate([row], tablefmt="plain")
            out = np.array([table.encode(), sys.prefix.encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]))
        return responses
"""


def test_a_python_model_in_its_own_environment(environment, tmp_path, start_server):
    """Triton's EXECUTION_ENV_PATH for a model.py that needs a package the server lacks."""
    repo = tmp_path / "repo"
    model = add_model(
        repo,
        "m",
        config("$$TRITON_MODEL_DIRECTORY/env").replace('"table"', '"python"'),
        files={"1/model.py": PYTHON_MODEL},
    )
    shutil.copytree(environment, model / "env", symlinks=True)
    table, prefix = infer(start_server([repo]))
    assert table == "1  2"
    assert prefix == str(model / "env")
