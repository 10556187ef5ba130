#!/usr/bin/env python3
"""Send the model-management requests to a real Triton and to tritium; print where the answers differ.

Both servers serve a repository this script builds (``--make-repo DIR``: python models
``simple`` with versions 1 and 2, ``broken_init`` whose initialize raises) in explicit mode,
and tritium with ``--model-load-allow-file-override=true`` (Triton always accepts uploads):

    python scripts/compare_model_management.py --make-repo /tmp/mm
    # Triton 2.51 (see /work/ref/start_triton.sh) and tritium, each on a fresh copy of /tmp/mm:
    #   ... --model-control-mode=explicit --exit-on-error=false
    python scripts/compare_model_management.py --triton 127.0.0.1:18000,127.0.0.1:18001 \\
        --tritium 127.0.0.1:8000,127.0.0.1:8001

Each case is one HTTP request (status and body) or one gRPC call (status code and details or
the response as text); the model folder's absolute path is replaced by ``<repo>``. Results of
a run (recorded 2026-11-30, 79 cases over modes explicit, none, poll and restricted APIs) are
summarized in docs/compatibility.md. Exit status: 0 when all agree, 1 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import re
import sys
from pathlib import Path
from typing import Any

MODEL_PY = """
import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.ins = [i["name"] for i in cfg["input"]]
        self.outs = [o["name"] for o in cfg["output"]]

    def execute(self, requests):
        responses = []
        for req in requests:
            outs = [pb_utils.Tensor(o, pb_utils.get_input_tensor_by_name(req, i).as_numpy())
                    for i, o in zip(self.ins, self.outs)]
            responses.append(pb_utils.InferenceResponse(output_tensors=outs))
        return responses
"""
BROKEN_PY = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom: deliberate failure in initialize")

    def execute(self, requests):
        return []
"""
IO = (
    'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ %s ] } ]\n'
    'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %s ] } ]\n'
)


def make_repo(root: Path) -> None:
    """Write the repository both servers serve."""
    for name, text, mbs, dims, versions in (
        ("simple", MODEL_PY, 8, 16, (1, 2)),
        ("broken_init", BROKEN_PY, 0, 4, (1,)),
    ):
        folder = root / name
        for v in versions:
            (folder / str(v)).mkdir(parents=True, exist_ok=True)
            (folder / str(v) / "model.py").write_text(text)
        (folder / "config.pbtxt").write_text(f'backend: "python"\nmax_batch_size: {mbs}\n' + IO % (dims, dims))


def _config(name: str, **extra: Any) -> str:
    return json.dumps(
        {
            "name": name,
            "backend": "python",
            "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
            **extra,
        }
    )


def http_cases() -> list[tuple[str, str, Any]]:
    """(method, path, JSON body or raw text or None), in order (later cases see earlier loads)."""
    py = base64.b64encode(MODEL_PY.encode()).decode()
    return [
        ("POST", "/v2/repository/index", None),
        ("POST", "/v2/repository/index", {"ready": True}),
        ("POST", "/v2/repository/index", "{bad"),
        ("POST", "/v2/repository/index", {"ready": "yes"}),
        ("GET", "/v2/repository/index", None),
        ("POST", "/v2/repository/models/simple/load", None),
        ("POST", "/v2/repository/index", None),
        ("POST", "/v2/repository/models/nonexist/load", None),
        ("POST", "/v2/repository/models/broken_init/load", None),
        ("POST", "/v2/repository/models/nonexist/unload", None),
        ("POST", "/v2/repository/models/simple/unload", {"parameters": {"unload_dependents": True}}),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"config": _config("simple")}}),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"config": "{not json"}}),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"config": _config("other")}}),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"config": 5}}),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"file:1/model.py": py}}),
        (
            "POST",
            "/v2/repository/models/uploaded/load",
            {"parameters": {"config": _config("uploaded"), "file:1/model.py": py}},
        ),
        (
            "POST",
            "/v2/repository/models/evil/load",
            {"parameters": {"config": _config("evil"), "file:../../escape.py": py}},
        ),
        ("POST", "/v2/repository/models/simple/load", {"parameters": {"foo": "bar"}}),
        ("POST", "/v2/repository/models/simple/load", "notjson"),
        ("GET", "/v2/repository/models/simple/load", None),
        (
            "POST",
            "/v2/repository/models/simple/load",
            {"parameters": {"config": _config("simple", version_policy={"all": {}})}},
        ),
        ("POST", "/v2/repository/index", None),
    ]


def run_http(address: str, repo_path: str) -> list[list[Any]]:
    host, port = address.rsplit(":", 1)
    out = []
    for method, path, body in http_cases():
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        raw = None if body is None else (body if isinstance(body, str) else json.dumps(body))
        conn.request(method, path, body=raw)
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        out.append([f"{method} {path} {str(raw)[:80]}", resp.status, _normalize(text, repo_path)])
        conn.close()
    return out


def run_grpc(address: str, repo_path: str) -> list[list[Any]]:
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as svc

    stub = svc.GRPCInferenceServiceStub(grpc.insecure_channel(address))
    cases = [
        ("RepositoryIndex", pb.RepositoryIndexRequest()),
        ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="nonexist")),
        ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="broken_init")),
    ]
    for key, kind in (("foo", "string_param"), ("config", "int64_param"), ("file:1/model.py", "string_param")):
        request = pb.RepositoryModelLoadRequest(model_name="simple")
        setattr(request.parameters[key], kind, 5 if kind == "int64_param" else "x")
        cases.append(("RepositoryModelLoad", request))
    request = pb.RepositoryModelUnloadRequest(model_name="simple")
    request.parameters["unload_dependents"].string_param = "x"
    cases += [("RepositoryModelUnload", request), ("RepositoryIndex", pb.RepositoryIndexRequest(ready=True))]
    out = []
    for rpc, message in cases:
        try:
            reply = str(getattr(stub, rpc)(message, timeout=120))
            out.append([f"{rpc} {str(message)[:80]!r}", "OK", _normalize(reply, repo_path)])
        except grpc.RpcError as exc:
            out.append([f"{rpc} {str(message)[:80]!r}", exc.code().name, _normalize(exc.details() or "", repo_path)])
    return out


def _normalize(text: str, repo_path: str) -> str:
    return re.sub(re.escape(repo_path) if repo_path else r"(?!)", "<repo>", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--make-repo", type=Path, help="write the repository here and exit")
    parser.add_argument("--triton", help="HTTP,gRPC addresses of the Triton server")
    parser.add_argument("--tritium", help="HTTP,gRPC addresses of the tritium server")
    parser.add_argument("--triton-repo", default="", help="Triton's repository path (replaced by <repo>)")
    parser.add_argument("--tritium-repo", default="", help="tritium's repository path (replaced by <repo>)")
    args = parser.parse_args()
    if args.make_repo:
        make_repo(args.make_repo)
        return 0
    if not (args.triton and args.tritium):
        parser.error("give --make-repo, or both --triton and --tritium")
    answers = []
    for target, repo in ((args.triton, args.triton_repo), (args.tritium, args.tritium_repo)):
        http_address, grpc_address = target.split(",")
        answers.append(run_http(http_address, repo) + run_grpc(grpc_address, repo))
    differ = 0
    for (case, *a), (_, *b) in zip(*answers):
        if a != b:
            differ += 1
            print(f"DIFF {case}\n  triton : {a}\n  tritium: {b}")
    print(f"{len(answers[0]) - differ} of {len(answers[0])} cases agree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
