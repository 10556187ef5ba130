#!/usr/bin/env python3
"""Where one request's time goes through Ray Serve: sequential add_sub, one replica, against tritium-server.

One request at a time (the latency a lone client sees), ``--requests`` of each
after a warm-up, median and mean in µs, on this machine:

* **direct**: one ``tritium-server`` over HTTP and gRPC (stock tritonclient);
* **Serve**: the ``tritium.integrations.ray_serve`` application (1 replica) through
  Serve's HTTP and gRPC proxies (the same clients);
* **handle**: calls through a Serve ``DeploymentHandle`` from a Ray driver (this
  process) to a no-op method: the tritium replica's ``check_health`` and the no-op
  application's ``ping`` (Serve's router, a Ray actor call, the replica's request
  handling; no proxy, no work);
* **tritium in the replica**: tritium's own part, measured in this process on an
  :class:`~tritium.core.server.InferenceServer` with the same repository (no
  Ray): the integration's adapters over the endpoints' handlers (``HttpAdapter`` for
  HTTP with the body tritonclient sends, ``GrpcAdapter.ModelInfer`` for gRPC) and, inside them, the core's
  ``server.infer`` (the request through the model's worker process and back).

The tritium application is measured as deployed three ways (``--variants``):
``default`` (its defaults: no access log, tritium on the replica's own event
loop), ``access-log`` (``access_log=true``) and ``access-log+thread`` (also
``separate_thread=true``: Serve's own defaults), each deployed in turn, round
after round (``--rounds``), beside a no-op Serve application that gets the same
requests (what Serve alone costs).

Writes its section of ``docs/performance.md`` (``--output``). Needs the ``ray`` extra.

Usage::

    python benchmarks/ray_serve_breakdown.py [--requests 300] [--rounds 3] [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, write_section  # noqa: E402
from tests.support.ray_cluster import RayCluster, replicas_in_metrics  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

WARMUP = 50
VARIANTS: dict[str, dict[str, Any]] = {  # the application's arguments of each Serve deployment measured
    "default": {},  # tritium's defaults: no access log, tritium on the replica's event loop
    "access-log": {"access_log": True},
    "access-log+thread": {"access_log": True, "separate_thread": True},  # Serve's own defaults
}
Timing = tuple[float, float]  # median, mean (µs)


def samples(call: Callable[[], Any], n: int) -> list[float]:
    """µs of each of ``n`` runs of ``call``, one after another (after a warm-up)."""
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    return times


def summary(times: list[float]) -> Timing:
    return statistics.median(times), statistics.fmean(times)


def timed(call: Callable[[], Any], n: int) -> Timing:
    """Median and mean µs of ``call`` run ``n`` times one after another (after a warm-up)."""
    return summary(samples(call, n))


async def timed_async(call: Callable[[], Any], n: int) -> Timing:
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times), statistics.fmean(times)


def build_repository(work: Path) -> Path:
    repo = work / "models"
    for name in ("config.pbtxt", "1/model.py"):
        target = repo / "add_sub" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((ROOT / "examples" / "python_models" / "add_sub" / name).read_text())
    return repo


def _arrays() -> tuple[np.ndarray, np.ndarray]:
    return np.arange(4, dtype=np.float32), np.full(4, 0.5, dtype=np.float32)


def clients(http_url: str, grpc_url: str, application: str | None = None) -> dict[str, Callable[[], Any]]:
    """One add_sub inference per call over each protocol (binary tensors over HTTP).

    :param application: the Serve application gRPC calls name (Serve's gRPC proxy routes by it
        when the cluster runs more than one).
    """
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a, b = _arrays()
    http = httpclient.InferenceServerClient(http_url, network_timeout=60)
    grpc = grpcclient.InferenceServerClient(grpc_url)
    hin = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    gin = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    for tensors in (hin, gin):
        tensors[0].set_data_from_numpy(a)
        tensors[1].set_data_from_numpy(b)
    expected = a + b

    def over_http() -> None:
        assert np.array_equal(http.infer("add_sub", hin).as_numpy("OUTPUT0"), expected)

    headers = {"application": application} if application else None

    def over_grpc() -> None:
        assert np.array_equal(grpc.infer("add_sub", gin, headers=headers).as_numpy("OUTPUT0"), expected)

    return {"http": over_http, "grpc": over_grpc}


class Noop:
    """A Serve deployment that does nothing: what Serve alone costs a request (no tritium in it)."""

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import Response

        await request.body()
        return Response(b"{}", media_type="application/json")

    async def ModelInfer(self, request: Any, grpc_context: Any = None) -> Any:
        from tritium.proto import grpc_service_pb2 as pb

        return pb.ModelInferResponse(model_name=request.model_name)

    async def ping(self) -> None:
        return None


def noop_clients(cluster: RayCluster) -> dict[str, Callable[[], Any]]:
    """The add_sub requests tritonclient sends, to the ``noop`` application (answers not checked)."""
    import http.client

    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a, b = _arrays()
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs)
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(json_size)}
    conn = http.client.HTTPConnection("127.0.0.1", cluster.http_port, timeout=60)
    grpc = grpcclient.InferenceServerClient(cluster.grpc_url)
    gin = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    gin[0].set_data_from_numpy(a)
    gin[1].set_data_from_numpy(b)

    def over_http() -> None:
        conn.request("POST", "/noop/v2/models/add_sub/infer", body=body, headers=headers)
        response = conn.getresponse()
        assert response.status == 200 and response.read() == b"{}"

    def over_grpc() -> None:
        grpc.infer("add_sub", gin, headers={"application": "noop"})

    return {"http": over_http, "grpc": over_grpc}


def grpc_request() -> Any:
    from tritium.proto import grpc_service_pb2 as pb

    a, b = _arrays()
    request = pb.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[4])
    request.raw_input_contents.extend([a.tobytes(), b.tobytes()])
    return request


def measure_direct(repo: Path, work: Path, n: int) -> dict[str, Timing]:
    server = ServerProcess([repo], log_path=work / "server.log")
    server.start()
    try:
        return {protocol: timed(call, n) for protocol, call in clients(server.http_url, server.grpc_url).items()}
    finally:
        server.stop()


def measure_in_process(repo: Path, n: int) -> dict[str, Timing]:
    """tritium's part of a Serve request, without Ray: the integration's handlers and the core inside them."""
    import tritonclient.http as httpclient
    from starlette.requests import Request

    from tritium.cli import parse_args
    from tritium.frontends.base import LocalView
    from tritium.frontends.kserve_grpc.codec import to_infer_request
    from tritium.frontends.kserve_grpc.servicer import InferenceServicer
    from tritium.integrations.ray_serve.grpc_proxy import GrpcAdapter
    from tritium.integrations.ray_serve.http_proxy import HttpAdapter

    async def run() -> dict[str, Timing]:
        from tritium.core.server import InferenceServer

        options, _ = parse_args([f"--model-repository={repo}"])
        options.http = options.grpc = options.metrics = False
        server = InferenceServer(options)
        await server.start(frontends=False)
        try:
            a, b = _arrays()
            inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b)
            body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs)
            headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(len(body)).encode())]
            if json_size is not None:
                headers.append((b"inference-header-content-length", str(json_size).encode()))
            http = HttpAdapter(server, LocalView(server))  # inference does not use the cluster view

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            scope = {
                "type": "http",
                "method": "POST",
                "path": "/v2/models/add_sub/infer",
                "raw_path": b"/v2/models/add_sub/infer",
                "query_string": b"",
                "headers": headers,
            }

            async def http_handler() -> None:
                response = await http.handle(Request(scope, receive))
                assert response.status_code == 200, response.body

            methods = GrpcAdapter()
            methods.servicer = InferenceServicer(server)
            request = grpc_request()

            async def grpc_handler() -> None:
                response = await methods.ModelInfer(request)
                assert len(response.raw_output_contents) == 2

            async def core() -> None:
                response = await server.infer(to_infer_request(request, server.model))
                response.release()

            return {
                "http handler": await timed_async(http_handler, n),
                "grpc handler": await timed_async(grpc_handler, n),
                "core": await timed_async(core, n),
            }
        finally:
            await server.stop()

    return asyncio.run(run())


def deploy(cluster: RayCluster, repo: Path, args: dict[str, Any]) -> None:
    config = cluster.config(
        {"model_repository": str(repo), "num_replicas": 1, "num_cpus": 0.5, "graceful_shutdown_timeout_s": 5, **args}
    )
    cluster.serve_run(config)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if len(replicas_in_metrics(cluster.http_url)) == 1:
                time.sleep(5)  # the previous variant's replica stops
                if len(replicas_in_metrics(cluster.http_url)) == 1:
                    return
        except Exception:
            pass
        time.sleep(1)
    raise RuntimeError(f"the replica did not come up:\n{cluster.serve_logs()}")


def measure_handle(app: str, method: str, n: int) -> list[float]:
    """Calls through a Serve ``DeploymentHandle`` from this Ray driver to a no-op method of ``app``'s ingress.

    Serve's router and a Ray actor call to the replica and back, and the replica's
    request handling, with no work in the method and no proxy.
    """
    from ray import serve

    handle = serve.get_app_handle(app).options(method_name=method)
    return samples(lambda: handle.remote().result(), n)


def measure_serve(repo: Path, n: int, variants: list[str], rounds: int) -> dict[str, dict[str, Timing]]:
    """Each variant deployed in turn, ``rounds`` times over (the machine's load drifts): ``n`` requests a round.

    Beside each, a no-op Serve application (``noop``, at ``/noop``) gets the same requests.
    """
    kinds = ("http", "grpc", "handle")
    got: dict[str, dict[str, list[float]]] = {v: {k: [] for k in kinds} for v in [*variants, "noop"]}
    cluster = RayCluster(num_cpus=2).start()
    try:
        # this process joins as a Ray driver: the cluster's settings first (Ray reads some at import)
        os.environ.update({k: v for k, v in cluster.env.items() if k.startswith("RAY_")})
        import ray
        from ray import serve

        for round_ in range(rounds):
            for variant in variants:
                deploy(cluster, repo, VARIANTS[variant])  # a config deploy: replaces every application
                ray.init(address=cluster.address, namespace="serve", log_to_driver=False)
                try:
                    noop = serve.deployment(Noop, name="Noop", ray_actor_options={"num_cpus": 0.5})
                    serve.run(noop.bind(), name="noop", route_prefix="/noop")
                    for protocol, call in clients(cluster.http_url, cluster.grpc_url, "tritium").items():
                        got[variant][protocol] += samples(call, n)
                    got[variant]["handle"] += measure_handle("tritium", "check_health", n)
                    if variant == variants[0]:
                        for protocol, call in noop_clients(cluster).items():
                            got["noop"][protocol] += samples(call, n)
                        got["noop"]["handle"] += measure_handle("noop", "ping", n)
                finally:
                    ray.shutdown()
                print(round_, variant, {k: f"{summary(v)[0]:.0f}" for k, v in got[variant].items()}, flush=True)
    finally:
        cluster.stop()
    return {v: {k: summary(times) for k, times in parts.items()} for v, parts in got.items()}


def render(
    direct: dict[str, Timing], local: dict[str, Timing], serve: dict[str, dict[str, Timing]], n: int, rounds: int
) -> str:
    def us(t: Timing | None) -> str:
        return f"{t[0]:,.0f} ({t[1]:,.0f})" if t else "–"

    lines = [
        "## Ray Serve: where one request's time goes",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/ray_serve_breakdown.py "
        f"--requests {n} --rounds {rounds}` ({os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        "CPU only; Ray 2.60.0, one local node on loopback, one replica of 0.5 CPU). add_sub (Triton's python "
        f"model, 4 FP32 values), one request at a time from one tritonclient, {n} requests after a "
        f"{WARMUP}-request warm-up (through Serve: {n} per round, each variant deployed once a round, in turn, "
        f"{rounds} rounds); median (mean) µs per request. The machine is shared: its load average "
        f"was {LOAD[0]:.1f} when the run started and {os.getloadavg()[0]:.1f} at its end.",
        "",
        "| path | HTTP | gRPC |",
        "| --- | ---: | ---: |",
        f"| one tritium-server | {us(direct.get('http'))} | {us(direct.get('grpc'))} |",
    ]
    names = {v: f"the tritium application, `{v}`" for v in serve if v != "noop"}
    names["noop"] = "a no-op Serve application (returns at once; no tritium in it)"
    for variant, results in serve.items():
        lines.append(f"| through Serve's proxies: {names[variant]} | {us(results['http'])} | {us(results['grpc'])} |")
    for variant, results in serve.items():
        method = "`ping`" if variant == "noop" else "`check_health`"
        lines.append(
            f"| a DeploymentHandle call to a no-op method ({method}) from a Ray driver: {names[variant]} "
            f"| {us(results['handle'])} | {us(results['handle'])} |"
        )
    lines += [
        f"| tritium's handler, in this process without Ray (`HttpAdapter` / `GrpcAdapter.ModelInfer`) "
        f"| {us(local.get('http handler'))} | {us(local.get('grpc handler'))} |",
        f"| of it, tritium's core (`server.infer`: to the model's worker process and back) "
        f"| {us(local.get('core'))} | {us(local.get('core'))} |",
        "",
    ]
    base, noop = serve.get("default"), serve.get("noop")
    if base and noop:
        core = local["core"][0]
        handler = {"http": local["http handler"][0], "grpc": local["grpc handler"][0]}

        def row(label: str, value: Callable[[str], float]) -> str:
            return f"| {label} | {value('http'):,.0f} | {value('grpc'):,.0f} |"

        lines += [
            "Medians of the `default` deployment, split by subtraction (µs):",
            "",
            "| part | HTTP | gRPC |",
            "| --- | ---: | ---: |",
            row("Serve alone: a request to a no-op application through its proxy", lambda p: noop[p][0]),
            row(
                "of it, the handle call (Serve's router, the Ray actor call, the replica's request handling)",
                lambda p: noop["handle"][0],
            ),
            row(
                "of it, Serve's proxy (its HTTP/gRPC server; HTTP: the body fetched back from the proxy)",
                lambda p: noop[p][0] - noop["handle"][0],
            ),
            row("what tritium's application adds to that", lambda p: base[p][0] - noop[p][0]),
            row("of it, tritium's integration (parse, route, render)", lambda p: handler[p] - core),
            row("of it, tritium's core and the model's worker process", lambda p: core),
            "",
        ]
    return "\n".join(lines)


LOAD = os.getloadavg()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement (after the warm-up)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="Serve deployments to measure")
    parser.add_argument("--rounds", type=int, default=2, help="times each variant is deployed and measured")
    parser.add_argument("--output", type=Path, default=None, help="write the section into this markdown file")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    with tempfile.TemporaryDirectory(prefix="tritium-bench-") as tmp:
        work = Path(tmp)
        repo = build_repository(work)
        direct = measure_direct(repo, work, args.requests)
        print("direct", direct, flush=True)
        local = measure_in_process(repo, args.requests)
        print("in process", local, flush=True)
        serve = measure_serve(repo, args.requests, variants, args.rounds)
    text = render(direct, local, serve, args.requests, args.rounds)
    if args.output:
        write_section(args.output, "ray_serve_breakdown", text)
    print(text)


if __name__ == "__main__":
    main()
