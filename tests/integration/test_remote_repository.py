"""Remote model repositories: ``s3://`` against a real S3-compatible server (moto's, on loopback).

The test starts ``moto_server`` as a subprocess, uploads a model repository with boto3, and
starts tritium on ``s3://bucket/models`` with credentials and the endpoint in the standard
environment variables. Remote models are mirrored into ``--model-cache-directory`` once per
version; poll mode picks up a version added on the remote side.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import http_call
from tests.support.repo import identity_config
from tests.support.server import free_port

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")
pytest.importorskip("moto")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The endpoint URL of a moto S3 server on loopback (stopped by PID afterwards)."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


def put(client: Any, bucket: str, key: str, body: bytes | str) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)


def test_s3_repository(s3: str, tmp_path: Path, start_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env(s3).items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=s3)
    client.create_bucket(Bucket="bucket")
    put(client, "bucket", "models/remote_m/config.pbtxt", identity_config(dims="[ 4 ]", max_batch_size=0))
    put(client, "bucket", "models/remote_m/1/weights.bin", b"\x00" * 1024)
    put(client, "bucket", "models/other/config.pbtxt", identity_config(dims="[ 2 ]", max_batch_size=0))
    put(client, "bucket", "models/other/3/weights.bin", b"\x01")
    cache = tmp_path / "cache"
    server = start_server(
        ["s3://bucket/models"],
        ["--model-control-mode=poll", "--repository-poll-secs=1", f"--model-cache-directory={cache}"],
    )
    status, _, body = http_call(server, "POST", "/v2/repository/index")
    assert (status, json.loads(body)) == (
        200,
        [
            {"name": "other", "version": "3", "state": "READY"},
            {"name": "remote_m", "version": "1", "state": "READY"},
        ],
    )
    request = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
    status, _, body = http_call(server, "POST", "/v2/models/remote_m/infer", json.dumps(request).encode())
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    (mirror,) = list((cache / "remote").iterdir())
    assert (mirror / "remote_m" / "1" / "weights.bin").read_bytes() == b"\x00" * 1024
    # a version is downloaded once: a file placed in the local copy survives later polls
    (mirror / "remote_m" / "1" / "local-mark").write_text("x")
    put(client, "bucket", "models/remote_m/2/weights.bin", b"\x02")  # a new version on the remote side
    deadline = time.monotonic() + 90
    want = [
        {"name": "other", "version": "3", "state": "READY"},
        {"name": "remote_m", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
        {"name": "remote_m", "version": "2", "state": "READY"},
    ]
    while json.loads(http_call(server, "POST", "/v2/repository/index")[2]) != want:
        assert time.monotonic() < deadline, http_call(server, "POST", "/v2/repository/index")[2]
        time.sleep(0.3)
    assert (mirror / "remote_m" / "1" / "local-mark").exists()
    assert (mirror / "remote_m" / "2" / "weights.bin").read_bytes() == b"\x02"
    # removed on the remote side: unloaded, and gone from the mirror
    client.delete_object(Bucket="bucket", Key="models/other/config.pbtxt")
    client.delete_object(Bucket="bucket", Key="models/other/3/weights.bin")
    while http_call(server, "GET", "/v2/models/other/ready")[0] == 200:
        assert time.monotonic() < deadline + 60
        time.sleep(0.3)
    assert not (mirror / "other").exists()


def test_s3_host_port_form(s3: str, tmp_path: Path, start_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's ``s3://host:port/bucket/path`` names an S3-compatible server without AWS_ENDPOINT_URL."""
    for key, value in env(s3).items():
        if key != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    client = boto3.client("s3", endpoint_url=s3)
    client.create_bucket(Bucket="hostport")
    put(client, "hostport", "repo/hp/config.pbtxt", identity_config(dims="[ 4 ]", max_batch_size=0))
    put(client, "hostport", "repo/hp/1/weights.bin", b"\x00")
    host_port = s3.split("://", 1)[1]
    server = start_server([f"s3://{host_port}/hostport/repo"], [f"--model-cache-directory={tmp_path}"])
    status, _, body = http_call(server, "POST", "/v2/repository/index")
    assert (status, json.loads(body)) == (200, [{"name": "hp", "version": "1", "state": "READY"}])


def test_missing_bucket_is_a_start_up_error(
    s3: str, tmp_path: Path, start_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env(s3).items():
        monkeypatch.setenv(key, value)
    server = start_server(["s3://no-such-bucket/models"], [f"--model-cache-directory={tmp_path}"], wait=False)
    assert server.wait_exit(120) == 1
    assert "failed to poll model repository 's3://no-such-bucket/models'" in server.log()


@pytest.mark.parametrize(("url", "package"), [("gs://bucket/models", "gcsfs"), ("az://container/models", "adlfs")])
def test_scheme_without_its_package_names_the_package(
    tmp_path: Path, start_server: Any, url: str, package: str
) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed")
    server = start_server([url], [f"--model-cache-directory={tmp_path}"], wait=False)
    assert server.wait_exit(120) == 1
    scheme = url.split("://")[0]
    assert (
        f"model repository scheme '{scheme}://' needs the '{package}' package (pip install {package})" in server.log()
    )


def test_slow_download_logs_progress(
    s3: str, tmp_path: Path, start_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A download through a throttled link (1 MiB/s) logs its bytes and rate while it runs, then its end."""
    from tests.support.throttle import ThrottlingProxy

    host, port = s3.rsplit("://", 1)[1].split(":")
    proxy = ThrottlingProxy((host, int(port)), rate=1 << 20)
    try:
        for key, value in env(f"http://127.0.0.1:{proxy.port}").items():
            monkeypatch.setenv(key, value)
        client = boto3.client("s3", endpoint_url=s3)
        client.create_bucket(Bucket="slow")
        put(client, "slow", "models/big/config.pbtxt", identity_config(dims="[ 4 ]", max_batch_size=0))
        put(client, "slow", "models/big/1/weights.bin", b"\x00" * (5 << 20))
        server = start_server(["s3://slow/models"], [f"--model-cache-directory={tmp_path}"])
    finally:
        proxy.close()
    log = server.log()
    what = "downloading 'big/1' from s3://slow/models"
    assert f"{what}: 5.0 MiB to do" in log
    during = re.findall(rf"{re.escape(what)}: ([\d.]+) MiB of 5\.0 MiB \((\d+)%\), [\d.]+ [KM]iB/s$", log, re.M)
    assert during and 0 < float(during[0][0]) < 5, log
    assert re.search(rf"{re.escape(what)}: done, 5\.0 MiB in [\d.]+ s$", log, re.M), log
