"""TLS: Triton's ``--grpc-use-ssl`` flags, and HTTPS for the HTTP endpoint (tritium's addition).

Certificates are made here with ``cryptography``: a CA, a server certificate
for 127.0.0.1 / localhost and a client certificate. Clients are tritonclient's
own, with their SSL options (gRPC ``ssl=True, root_certificates=...``, mutual
TLS with ``private_key``/``certificate_chain``; HTTP ``ssl=True,
ssl_context_factory=...``). SIGHUP reloads the HTTPS certificate: new connections
see the new one, and a pair that does not load leaves the old one serving.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import re
import signal
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.grpc_transport import endpoints_cell, transport_line
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess


def _key():  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: str, key, issuer_name=None, issuer_key=None, ca=False, server=False):  # type: ignore[no-untyped-def]
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _pem(path: Path, key=None, cert=None) -> Path:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    if key is not None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    else:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


@pytest.fixture(scope="module")
def authority():  # type: ignore[no-untyped-def]
    """The test CA: its certificate and key."""
    ca_key = _key()
    return _certificate("tritium test CA", ca_key, ca=True), ca_key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory, authority) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_key = authority
    server_key, client_key = _key(), _key()
    server_cert = _certificate("localhost", server_key, ca.subject, ca_key, server=True)
    client_cert = _certificate("a client", client_key, ca.subject, ca_key)
    return {
        "ca": _pem(folder / "ca.pem", cert=ca),
        "server_cert": _pem(folder / "server.pem", cert=server_cert),
        "server_key": _pem(folder / "server.key", key=server_key),
        "client_cert": _pem(folder / "client.pem", cert=client_cert),
        "client_key": _pem(folder / "client.key", key=client_key),
    }


def _build(repo: Path) -> None:
    add_model(repo, "identity", identity_config("TYPE_FP32", "[ 4 ]"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Path]) -> Iterator[ServerProcess]:
    """gRPC over TLS, HTTPS with client certificates required (mutual TLS)."""
    args = [
        "--grpc-use-ssl=true",
        f"--grpc-server-cert={pki['server_cert']}",
        f"--grpc-server-key={pki['server_key']}",
        "--http-use-ssl-mutual=true",
        f"--http-server-cert={pki['server_cert']}",
        f"--http-server-key={pki['server_key']}",
        f"--http-root-cert={pki['ca']}",
        "--allow-metrics=false",
    ]
    root = tmp_path_factory.mktemp("tls")
    _build(root / "models")
    server = ServerProcess([root / "models"], args).start(wait_ready=False)
    try:
        deadline_ready(
            grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=str(pki["ca"])), server
        )
        yield server
    finally:
        server.stop()


def _inputs(module):  # type: ignore[no-untyped-def]
    tensor = module.InferInput("INPUT0", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.arange(4, dtype=np.float32).reshape(1, 4))
    return [tensor]


def test_grpc_over_tls_with_tritonclient(tls_server: ServerProcess, pki: dict[str, Path]) -> None:
    client = grpcclient.InferenceServerClient(tls_server.grpc_url, ssl=True, root_certificates=str(pki["ca"]))
    assert client.is_server_live()
    assert client.infer("identity", _inputs(grpcclient)).as_numpy("OUTPUT0").tolist() == [[0.0, 1.0, 2.0, 3.0]]
    plain = grpcclient.InferenceServerClient(tls_server.grpc_url)
    with pytest.raises(InferenceServerException):
        plain.is_server_live(client_timeout=10)
    # the start-up lines say TLS is on, for each endpoint
    assert f"Started GRPCInferenceService at {tls_server.grpc_url} (TLS)\n" in tls_server.log()
    assert f"Started HTTPService at 127.0.0.1:{tls_server.http_port} (HTTPS)\n" in tls_server.log()


def _client_context(pki: dict[str, Path], with_certificate: bool):  # type: ignore[no-untyped-def]
    def factory():  # type: ignore[no-untyped-def]
        context = ssl.create_default_context(cafile=str(pki["ca"]))
        if with_certificate:
            context.load_cert_chain(str(pki["client_cert"]), str(pki["client_key"]))
        return context

    return factory


@pytest.mark.filterwarnings("ignore:ssl.match_hostname:DeprecationWarning")  # geventhttpclient's own call
def test_https_with_client_certificates(tls_server: ServerProcess, pki: dict[str, Path]) -> None:
    client = httpclient.InferenceServerClient(
        tls_server.http_url, ssl=True, ssl_context_factory=_client_context(pki, True)
    )
    assert client.is_server_ready()
    assert client.infer("identity", _inputs(httpclient)).as_numpy("OUTPUT0").tolist() == [[0.0, 1.0, 2.0, 3.0]]
    stranger = httpclient.InferenceServerClient(
        tls_server.http_url, ssl=True, ssl_context_factory=_client_context(pki, False), connection_timeout=10
    )
    with pytest.raises(Exception):  # noqa: B017 (the TLS library decides which error a refused handshake is)
        stranger.is_server_live()
    assert client.is_server_live()  # the refused handshake left the endpoint serving


@pytest.fixture(scope="module")
def mutual_grpc_server(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Path]) -> Iterator[ServerProcess]:
    args = [
        "--grpc-use-ssl-mutual=true",
        f"--grpc-server-cert={pki['server_cert']}",
        f"--grpc-server-key={pki['server_key']}",
        f"--grpc-root-cert={pki['ca']}",
        "--allow-http=false",
        "--allow-metrics=false",
    ]
    root = tmp_path_factory.mktemp("mtls")
    _build(root / "models")
    server = ServerProcess([root / "models"], args).start(wait_ready=False)
    try:
        client = grpcclient.InferenceServerClient(
            server.grpc_url,
            ssl=True,
            root_certificates=str(pki["ca"]),
            private_key=str(pki["client_key"]),
            certificate_chain=str(pki["client_cert"]),
        )
        deadline_ready(client, server)
        yield server
    finally:
        server.stop()


def deadline_ready(client: grpcclient.InferenceServerClient, server: ServerProcess) -> None:
    """Wait until ``client`` (with its TLS settings) finds the server ready."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.proc is not None
        if server.proc.poll() is not None:
            raise AssertionError(f"tritium-server exited:\n{server.log()}")
        try:
            if client.is_server_ready():
                return
        except InferenceServerException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the TLS server did not become ready:\n{server.log()}")


def test_grpc_mutual_tls(mutual_grpc_server: ServerProcess, pki: dict[str, Path]) -> None:
    client = grpcclient.InferenceServerClient(
        mutual_grpc_server.grpc_url,
        ssl=True,
        root_certificates=str(pki["ca"]),
        private_key=str(pki["client_key"]),
        certificate_chain=str(pki["client_cert"]),
    )
    assert client.infer("identity", _inputs(grpcclient)).as_numpy("OUTPUT0").tolist() == [[0.0, 1.0, 2.0, 3.0]]
    anonymous = grpcclient.InferenceServerClient(
        mutual_grpc_server.grpc_url, ssl=True, root_certificates=str(pki["ca"])
    )
    with pytest.raises(InferenceServerException):
        anonymous.is_server_live(client_timeout=10)


def test_tls_flags_need_their_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    for flags, message in (
        (["--grpc-use-ssl=true"], "--grpc-use-ssl needs --grpc-server-cert"),
        (
            ["--http-use-ssl=true", "--http-server-cert=/nonexistent.pem", "--http-server-key=/x.key"],
            "--http-server-cert: no such file: /nonexistent.pem",
        ),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "tritium", f"--model-repository={tmp_path}", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2 and message in out.stderr, out.stderr


def test_garbage_to_grpc_methods_over_tls_is_invalid_argument(tls_server: ServerProcess, pki: dict[str, Path]) -> None:
    """TLS is served by the grpc.aio transport: undecodable messages are INVALID_ARGUMENT there too."""
    import grpc

    credentials = grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes())
    with grpc.secure_channel(tls_server.grpc_url, credentials) as channel:
        for method in (
            "ServerMetadata",
            "ModelMetadata",
            "RepositoryIndex",
            "SystemSharedMemoryRegister",
            "ModelInfer",
        ):
            call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}")
            with pytest.raises(grpc.RpcError) as info:
                call(b"\xff\xff\xff garbage", timeout=30)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, info.value.details())
            assert info.value.details().startswith("malformed "), info.value.details()
    # the start-up table and the log name grpc.aio, and TLS as the reason the native transport is not used
    line = transport_line(tls=True)
    assert line.endswith("): TLS (--grpc-use-ssl) is served by grpc.aio only")
    assert endpoints_cell(tls_server.log())[1:3] == [f"grpc 127.0.0.1:{tls_server.grpc_port}", f"transport: {line}"]
    assert f"gRPC transport: {line}\n" in tls_server.log()


# -- SIGHUP: the HTTPS endpoint reads its certificate and key again ------------------------------


def _server_pair(authority, folder: Path, name: str):  # type: ignore[no-untyped-def]
    """A new server key and certificate from the test CA, written to ``folder``: (cert file, key file, DER)."""
    from cryptography.hazmat.primitives import serialization

    ca, ca_key = authority
    key = _key()
    cert = _certificate("localhost", key, ca.subject, ca_key, server=True)
    der = cert.public_bytes(serialization.Encoding.DER)
    return _pem(folder / f"{name}.pem", cert=cert), _pem(folder / f"{name}.key", key=key), der


def _peer_certificate(server: ServerProcess, pki: dict[str, Path]) -> bytes:
    """The DER certificate a new TLS connection to the HTTPS endpoint is shown (verified against the CA)."""
    import socket

    context = ssl.create_default_context(cafile=str(pki["ca"]))
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as sock:
        with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


@pytest.fixture
def reloading_server(tmp_path: Path, authority) -> Iterator[tuple[ServerProcess, Path, Path, bytes]]:  # type: ignore[no-untyped-def]
    """HTTPS (no client certificates) from files of its own: the server, its cert and key files, the cert's DER."""
    from tests.support.clients import wait_grpc_ready

    cert, key, der = _server_pair(authority, tmp_path, "live")
    args = ["--http-use-ssl=true", f"--http-server-cert={cert}", f"--http-server-key={key}", "--allow-metrics=false"]
    _build(tmp_path / "models")
    server = ServerProcess([tmp_path / "models"], args).start(wait_ready=False)
    try:
        wait_grpc_ready(server)  # (gRPC is plaintext here: readiness without TLS)
        yield server, cert, key, der
    finally:
        server.stop()


def _hangup(server: ServerProcess) -> None:
    assert server.proc is not None and server.proc.poll() is None
    server.proc.send_signal(signal.SIGHUP)  # the server this test started, by its PID


@pytest.mark.filterwarnings("ignore:ssl.match_hostname:DeprecationWarning")  # geventhttpclient's own call
def test_sighup_reloads_the_https_certificate(reloading_server, authority, pki: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    server, cert, key, first = reloading_server
    assert _peer_certificate(server, pki) == first
    kept = http.client.HTTPSConnection(
        "127.0.0.1", server.http_port, timeout=10, context=ssl.create_default_context(cafile=str(pki["ca"]))
    )
    kept.request("GET", "/v2/health/live")
    assert kept.getresponse().read() == b""
    new_cert, new_key, second = _server_pair(authority, cert.parent, "next")
    cert.write_bytes(new_cert.read_bytes())
    key.write_bytes(new_key.read_bytes())
    assert second != first
    _hangup(server)
    deadline = time.monotonic() + 10
    while (seen := _peer_certificate(server, pki)) != second and time.monotonic() < deadline:
        time.sleep(0.1)
    assert seen == second
    assert f"HTTP TLS: certificate reloaded from {cert}\n" in server.log()
    # a connection made before keeps its session (and its certificate)
    kept.request("GET", "/v2/health/ready")
    response = kept.getresponse()
    assert response.status == 200 and response.read() == b""
    assert kept.sock is not None and kept.sock.getpeercert(binary_form=True) == first
    kept.close()
    client = httpclient.InferenceServerClient(
        server.http_url, ssl=True, ssl_context_factory=_client_context(pki, False)
    )
    assert client.infer("identity", _inputs(httpclient)).as_numpy("OUTPUT0").tolist() == [[0.0, 1.0, 2.0, 3.0]]
    client.close()


def _load_error(cert: Path, key: Path) -> str:
    """What ``ssl`` says of loading this pair (the server logs the same text)."""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        return str(exc)
    raise AssertionError(f"{cert} / {key} loaded")


@pytest.mark.filterwarnings("ignore:ssl.match_hostname:DeprecationWarning")  # geventhttpclient's own call
def test_sighup_with_broken_files_keeps_the_certificate(reloading_server, authority, pki: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    server, cert, key, first = reloading_server
    assert server.proc is not None
    other_cert, other_key, _ = _server_pair(authority, cert.parent, "other")
    good_cert, good_key = cert.read_bytes(), key.read_bytes()
    line = re.compile(
        rf"E\d{{4}} \d\d:\d\d:\d\d\.\d{{6}} +{server.proc.pid} tls\.py:\d+\] HTTP TLS: cannot load "
        rf"{re.escape(str(cert))} / {re.escape(str(key))}: (.+); keeping the certificate loaded before"
    )
    cases = {
        "garbage certificate": (b"not a certificate\n", good_key),
        "garbage key": (other_cert.read_bytes(), b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n"),
        "a key of another certificate": (other_cert.read_bytes(), good_key),
        "a certificate of another key": (good_cert, other_key.read_bytes()),
    }
    for done, (case, (cert_bytes, key_bytes)) in enumerate(cases.items(), 1):
        cert.write_bytes(cert_bytes)
        key.write_bytes(key_bytes)
        expected = _load_error(cert, key)
        _hangup(server)
        deadline = time.monotonic() + 10
        while len(errors := line.findall(server.log())) < done and time.monotonic() < deadline:
            time.sleep(0.1)
        assert errors[done - 1 :] == [expected], (case, server.log())
        # the old certificate and key stay: new connections are served with them
        assert _peer_certificate(server, pki) == first, case
        client = httpclient.InferenceServerClient(
            server.http_url, ssl=True, ssl_context_factory=_client_context(pki, False)
        )
        assert client.infer("identity", _inputs(httpclient)).as_numpy("OUTPUT0").tolist() == [[0.0, 1.0, 2.0, 3.0]]
        client.close()
    assert server.proc.poll() is None
    log = server.log()
    assert "Traceback" not in log and "certificate reloaded" not in log
    assert sum("HTTP TLS" in text for text in log.splitlines()) == len(cases)  # one line each
