#!/usr/bin/env python3
"""Model management with ensembles, against a real Triton and tritium side by side; print the differences.

Builds a repository (``--make-repo DIR``): python models ``a`` (+1), ``b`` (+10), ``c`` (+100),
ensembles ``ens`` (a then b) and ``ens2`` (b then c). Start each server in explicit mode with
nothing loaded on its own fresh copy, then run the same sequence of load and unload requests
against both; after each step the repository index and an inference of each ensemble are
compared:

    python scripts/compare_ensemble_management.py --make-repo /tmp/em
    # Triton 2.51: /work/ref/start_triton.sh /tmp/em_triton ... --model-control-mode=explicit
    # tritium:     tritium-server --model-repository=/tmp/em_tritium --model-control-mode=explicit
    python scripts/compare_ensemble_management.py --triton 127.0.0.1:18000 --tritium 127.0.0.1:8000

Exit status: 0 when all steps agree, 1 otherwise. Results are summarized in
docs/model_management.md (Ensembles).
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from pathlib import Path
from typing import Any

MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x + ADD).astype(np.float32))]))
        return out
"""
IO = (
    'input [ { name: "%s" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "%s" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)
RENAMED_A = {
    "name": "a",
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT9", "data_type": "TYPE_FP32", "dims": [4]}],
}


def make_repo(root: Path) -> None:
    for name, add in (("a", 1), ("b", 10), ("c", 100)):
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n' + IO % ("INPUT0", "OUTPUT0")
        )
        (root / name / "1" / "model.py").write_text(MODEL_PY.replace("ADD", str(add)))
    for name, first, second in (("ens", "a", "b"), ("ens2", "b", "c")):
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        steps = ", ".join(
            f'{{ model_name: "{m}" model_version: -1 input_map {{ key: "INPUT0" value: "{i}" }} '
            f'output_map {{ key: "OUTPUT0" value: "{o}" }} }}'
            for m, i, o in ((first, "IN", "mid"), (second, "mid", "OUT"))
        )
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
            + IO % ("IN", "OUT")
            + f"ensemble_scheduling {{ step [ {steps} ] }}\n"
        )


def steps() -> list[tuple[str, str, Any]]:
    """(title, path, body) of each request, in order."""
    load, unload = "/v2/repository/models/%s/load", "/v2/repository/models/%s/unload"
    deps = {"parameters": {"unload_dependents": True}}
    return [
        ("load ens", load % "ens", None),
        ("reload a", load % "a", None),
        ("unload a", unload % "a", None),
        ("load a", load % "a", None),
        ("unload ens", unload % "ens", None),
        ("reload a (ens unloaded on request)", load % "a", None),
        ("load ens", load % "ens", None),
        ("load ens2", load % "ens2", None),
        ("unload ens, dependents (b shared)", unload % "ens", deps),
        ("unload ens2, dependents", unload % "ens2", deps),
        ("load ens", load % "ens", None),
        ("unload a, dependents", unload % "a", deps),
        ("load ens", load % "ens", None),
        ("reload a, output renamed", load % "a", {"parameters": {"config": json.dumps(RENAMED_A)}}),
        ("load ens (does not fit a)", load % "ens", None),
    ]


def call(address: str, path: str, body: Any = None) -> tuple[int, Any]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body if body is not None else {}))
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, (json.loads(data) if data else None)
    finally:
        conn.close()


def observe(address: str) -> dict[str, Any]:
    """The index (UNLOADING settled) and each ensemble's answer."""
    deadline = time.monotonic() + 30
    while True:
        index = call(address, "/v2/repository/index")[1]
        if all(e.get("state") != "UNLOADING" for e in index) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out: dict[str, Any] = {"index": {e["name"]: [e.get("state"), e.get("reason")] for e in index}}
    for ens in ("ens", "ens2"):
        body = {"inputs": [{"name": "IN", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
        status, reply = call(address, f"/v2/models/{ens}/infer", body)
        out[ens] = reply["outputs"][0]["data"] if status == 200 else [status, reply["error"]]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make-repo", type=Path)
    parser.add_argument("--triton")
    parser.add_argument("--tritium")
    args = parser.parse_args()
    if args.make_repo:
        make_repo(args.make_repo)
        return 0
    differences = 0
    for title, path, body in steps():
        answers = [call(address, path, body) for address in (args.triton, args.tritium)]
        seen = [observe(address) for address in (args.triton, args.tritium)]
        same = answers[0] == answers[1] and seen[0] == seen[1]
        differences += not same
        print(f"{'same' if same else 'DIFF'}  {title}: {answers[0]}  {json.dumps(seen[0], sort_keys=True)}")
        if not same:
            print(f"      tritium: {answers[1]}  {json.dumps(seen[1], sort_keys=True)}")
    print(f"{len(steps()) - differences} of {len(steps())} steps agree")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
