"""``tritium-backend new NAME --language python|c``: start a third-party backend.

Generates a ready-to-build backend folder ``NAME/``:

- ``libtriton_NAME.py`` (Python) or ``NAME.c`` plus ``build.sh`` (C): a
  backend whose model doubles its FP32 input (``OUTPUT0 = 2 * INPUT0``);
- ``models/NAME_model/``: a model repository entry that uses it;
- ``test_NAME.py``: a pytest that builds the backend (C), serves the model
  with ``tritium-server`` and checks exact values over HTTP and gRPC;
- ``README.md``: how to build, test and deploy it.

Also ``python -m tritium.backend_cli``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "generate"]

_PYTHON_BACKEND = '''"""The {name} backend: OUTPUT0 = 2 * INPUT0 (FP32). Runs in tritium's worker process."""

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.errors import Code, TritonError


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    names = [i["name"] for i in model.config.get("input", [])]
    if names != ["INPUT0"]:
        raise TritonError(Code.INVALID_ARG, f"{name} model '{{model.name}}' needs exactly one input INPUT0, got {{names}}")


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    for request in requests:
        data = request.input("INPUT0")
        out = request.output_buffer("OUTPUT0", "FP32", data.shape)  # shared memory: no copy to the client
        out[...] = data * 2
        request.respond({{"OUTPUT0": out}})
'''

_C_BACKEND = """/* The {name} backend: OUTPUT0 = 2 * INPUT0 (FP32). Build: ./build.sh */
#include <string.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \\
  do {{                                        \\
    TRITONSERVER_Error* rie_err__ = (X);      \\
    if (rie_err__ != NULL) return rie_err__;  \\
  }} while (0)

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{{
  uint32_t major, minor;
  (void)backend;
  RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {{
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "{name}: backend API version not supported");
  }}
  return NULL;
}}

static TRITONSERVER_Error* run(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{{
  TRITONBACKEND_Input* input;
  TRITONBACKEND_Output* output;
  TRITONSERVER_DataType datatype;
  const int64_t* shape;
  uint32_t dims_count;
  uint64_t byte_size, size;
  const void* in;
  void* out;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, "INPUT0", &input));
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, NULL, &datatype, &shape, &dims_count, &byte_size, NULL));
  if (datatype != TRITONSERVER_TYPE_FP32) {{
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "{name}: INPUT0 must be FP32");
  }}
  RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, 0, &in, &size, &memory_type, &memory_type_id));
  RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, "OUTPUT0", datatype, shape, dims_count));
  RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &out, byte_size, &memory_type, &memory_type_id));
  for (uint64_t i = 0; i < byte_size / sizeof(float); ++i) {{
    float value;
    memcpy(&value, (const char*)in + i * sizeof value, sizeof value);
    value *= 2;
    memcpy((char*)out + i * sizeof value, &value, sizeof value);
  }}
  return NULL;
}}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{{
  (void)instance;
  for (uint32_t r = 0; r < request_count; ++r) {{
    TRITONBACKEND_Response* response;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == NULL) {{
      TRITONSERVER_Error* failure = run(requests[r], response);
      err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
      if (failure != NULL) TRITONSERVER_ErrorDelete(failure);
    }}
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
    err = TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
  }}
  return NULL;
}}
"""

_BUILD_SH = """#!/bin/sh
# Build libtriton_{name}.so next to this script (needs a C compiler and tritium installed).
set -e
cd "$(dirname "$0")"
INCLUDE=$("${{PYTHON:-python3}}" -m tritium.config_cli --include)
"${{CC:-cc}}" -shared -fPIC -O2 -I"$INCLUDE" {name}.c -o libtriton_{name}.so
"""

_CONFIG = """backend: "{name}"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
"""

_TEST = '''"""Black-box test of the {name} backend: serve it with tritium-server, check exact values."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

HERE = Path(__file__).resolve().parent
LIBRARY = "{library}"


def free_ports(count):
    # bound together until all are picked: a port closed first may be handed out again at once
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("{name}")
    if LIBRARY.endswith(".so"):
        subprocess.run(["sh", str(HERE / "build.sh")], check=True, env=dict(os.environ, PYTHON=sys.executable))
    backends = root / "backends" / "{name}"
    backends.mkdir(parents=True)
    shutil.copy(HERE / LIBRARY, backends / LIBRARY)
    shutil.copytree(HERE / "models", root / "models")
    (root / "models" / "{name}_model" / "1").mkdir(exist_ok=True)
    http_port, grpc_port = free_ports(2)
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritium", f"--model-repository={{root / 'models'}}",
         f"--backend-directory={{root / 'backends'}}", f"--http-port={{http_port}}",
         f"--grpc-port={{grpc_port}}", "--allow-metrics=false", "--http-address=127.0.0.1",
         "--grpc-address=127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    client = httpclient.InferenceServerClient(f"127.0.0.1:{{http_port}}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if client.is_server_ready():
                break
        except Exception:
            pass
        assert proc.poll() is None, (root / "server.log").read_text()
        time.sleep(0.2)
    client.close()
    yield http_port, grpc_port
    proc.terminate()
    proc.wait(60)
    log.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_output_is_twice_the_input(server, protocol):
    http_port, grpc_port = server
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(f"127.0.0.1:{{http_port if protocol == 'http' else grpc_port}}")
    tensor = module.InferInput("INPUT0", [3], "FP32")
    tensor.set_data_from_numpy(np.array([1.5, -2.0, 0.0], np.float32))
    result = client.infer("{name}_model", [tensor])
    assert result.as_numpy("OUTPUT0").tolist() == [3.0, -4.0, 0.0]
    client.close()
'''

_README = """# The `{name}` backend for tritium ({language})

A model whose config says `backend: "{name}"` is served by this backend:
`OUTPUT0 = 2 * INPUT0` (FP32). Replace the computation with yours.

{build}
Test it (needs `pip install pytest 'tritonclient[http,grpc]'`{compiler}):

```sh
python -m pytest test_{name}.py
```

Deploy it: copy `{library}` into `<backend directory>/{name}/` (or into a
model's folder, or its version folder), then
`tritium-server --model-repository=models --backend-directory=<backend directory>`.
See docs/backend_developer_guide.md in tritium for the API, the process model
and the ownership rules.
"""


def generate(name: str, language: str, directory: Path) -> Path:
    """Write the backend folder ``directory/name`` and return it.

    :param name: the backend name (letters, digits, ``_``; the model config's ``backend``).
    :param language: ``"python"`` or ``"c"``.
    :raises ValueError: for a bad name or language, or when the folder exists.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"invalid backend name '{name}': use letters, digits and '_'")
    if language not in ("python", "c"):
        raise ValueError(f"unknown language '{language}': python or c")
    folder = directory / name
    if folder.exists():
        raise ValueError(f"{folder} already exists")
    (folder / "models" / f"{name}_model" / "1").mkdir(parents=True)
    (folder / "models" / f"{name}_model" / "config.pbtxt").write_text(_CONFIG.format(name=name))
    if language == "python":
        library = f"libtriton_{name}.py"
        (folder / library).write_text(_PYTHON_BACKEND.format(name=name))
        build, compiler = "", ""
    else:
        library = f"libtriton_{name}.so"
        (folder / f"{name}.c").write_text(_C_BACKEND.format(name=name))
        script = folder / "build.sh"
        script.write_text(_BUILD_SH.format(name=name))
        script.chmod(0o755)
        build = f"Build it (a C compiler and tritium installed):\n\n```sh\n./build.sh   # -> {library}\n```\n"
        compiler = ", tritium with its `native` extra and a C compiler"
    (folder / f"test_{name}.py").write_text(_TEST.format(name=name, library=library))
    (folder / "README.md").write_text(
        _README.format(name=name, language=language, build=build, compiler=compiler, library=library)
    )
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    """``tritium-backend new NAME --language python|c [--directory DIR]``."""
    parser = argparse.ArgumentParser(prog="tritium-backend", description="tritium backend SDK")
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="generate a ready-to-build backend folder with its own test")
    new.add_argument("name", help="backend name (the model config's backend field)")
    new.add_argument("--language", choices=["python", "c"], default="python")
    new.add_argument("--directory", type=Path, default=Path("."), help="where to create NAME/ (default: .)")
    args = parser.parse_args(argv)
    try:
        folder = generate(args.name, args.language, args.directory)
    except ValueError as exc:
        print(f"tritium-backend: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(next_steps(folder, args.name, args.language))
    return 0


def next_steps(folder: Path, name: str, language: str) -> str:
    """What ``tritium-backend new`` prints: the files it wrote, then the commands to build, test and serve.

    Serving needs no copy: the backend folder is ``<backend directory>/<name>/``
    for a backend directory that is the folder above it.
    """
    files = sorted(
        p.relative_to(folder).as_posix() + ("" if p.is_file() else "/")
        for p in folder.rglob("*")
        if p.is_file() or not any(p.iterdir())
    )
    library = f"libtriton_{name}.py" if language == "python" else f"libtriton_{name}.so"
    build = f"./build.sh   # build: -> {library}" if language == "c" else "# build: nothing to build (a Python backend)"
    lines = [f"wrote {folder}/ (a {language} backend: OUTPUT0 = 2 * INPUT0):"]
    lines += [f"  {f}" for f in files]
    lines += [
        "next:",
        f"  cd {folder}",
        f"  {build}",
        f"  pip install pytest 'tritonclient[http,grpc]'{' cffi' if language == 'c' else ''}   # what the test needs",
        f"  python -m pytest test_{name}.py   # test: serves models/ over HTTP and gRPC, checks exact values",
        f"  tritium-server --model-repository=models --backend-directory={folder.resolve().parent}   # serve",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
