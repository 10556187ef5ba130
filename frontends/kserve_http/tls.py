"""HTTPS for the HTTP endpoint (tritium's addition: Triton's HTTP endpoint leaves TLS to a proxy).

``--http-use-ssl`` with ``--http-server-cert``/``--http-server-key`` (PEM);
``--http-use-ssl-mutual`` also requires client certificates signed by
``--http-root-cert``. SIGHUP reloads the certificate and key from the same
files: connections made afterwards get the new ones, open ones keep theirs.
Runs in the core process, on its event loop.
"""

from __future__ import annotations

import logging
import ssl

from ...core.api import Code, TlsFiles, TritonError

log = logging.getLogger("tritium.http")

__all__ = ["ssl_context", "reload_certificate"]


def ssl_context(tls: TlsFiles) -> ssl.SSLContext:
    """A server context for ``tls`` (TLS 1.2 or later, ALPN ``http/1.1``).

    :raises TritonError: INVALID_ARG when a file cannot be read or the key does not match.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    _load(context, tls)
    if tls.mutual:
        try:
            context.load_verify_locations(cafile=tls.root)
        except (OSError, ssl.SSLError) as exc:
            raise TritonError(
                Code.INVALID_ARG, f"HTTP TLS: cannot read the root certificate {tls.root}: {exc}"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _load(context: ssl.SSLContext, tls: TlsFiles) -> None:
    try:
        context.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise TritonError(Code.INVALID_ARG, f"HTTP TLS: cannot load {tls.cert} / {tls.key}: {exc}") from None


def reload_certificate(context: ssl.SSLContext, tls: TlsFiles) -> None:
    """Load the certificate and key again (on SIGHUP); a failure is logged and the old ones stay.

    The pair is loaded into a scratch context first: OpenSSL's load is not atomic (a new
    certificate replaces the serving one before its key is read, so a key file that does not
    load or match would leave new handshakes failing), and only a pair that loads is put into
    the serving ``context``.
    """
    try:
        _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), tls)
        _load(context, tls)
    except TritonError as exc:
        log.error("%s; keeping the certificate loaded before", exc.message)
        return
    log.info("HTTP TLS: certificate reloaded from %s", tls.cert)
