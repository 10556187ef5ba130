"""TLS of the gRPC endpoint: Triton's ``--grpc-use-ssl``, ``--grpc-use-ssl-mutual`` and certificate flags.

Runs once, in the core process, when the endpoint starts.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from ...core.api import Code, TlsFiles, TritonError

__all__ = ["server_credentials"]


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """The server credentials of ``tls``: its key and certificate chain; with ``mutual``,
    client certificates are required and checked against ``root``.

    :raises TritonError: INVALID_ARG when a file cannot be read.
    """
    try:
        key, cert = Path(tls.key).read_bytes(), Path(tls.cert).read_bytes()
        root = Path(tls.root).read_bytes() if tls.root else None
    except OSError as exc:
        raise TritonError(Code.INVALID_ARG, f"gRPC TLS: cannot read {exc.filename}: {exc.strerror}") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=root, require_client_auth=tls.mutual)
