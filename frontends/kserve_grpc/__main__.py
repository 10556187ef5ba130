"""``python -m tritium.frontends.kserve_grpc``: which transport the gRPC endpoint of this install uses, and why.

``pip install`` does not show whether the native transport was built (pip
prints a build's output only with ``-v`` or when the build fails), so this
says it without starting a server::

    $ python -m tritium.frontends.kserve_grpc
    gRPC transport: native (gRPC C++ 1.51.1)
    with --grpc-use-ssl: grpc.aio (grpcio 1.85.3): TLS (--grpc-use-ssl) is served by grpc.aio only

or, where the extension was not built,
``gRPC transport: grpc.aio (grpcio 1.85.3): native transport not available
(the extension was not built: ...)``. The lines are the ones the server's
start-up table shows (:func:`~tritium.frontends.kserve_grpc.transport_choice`).
``--transport`` gives ``[frontends.grpc] transport`` (default ``auto``);
``--require-native`` exits 1 when the native transport cannot load, for
install checks and CI. Exit status 1 also when the setting cannot be served.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import TRANSPORTS, load_native_transport, transport_choice


def main(argv: Sequence[str] | None = None) -> int:
    """Print the transport lines; the exit status (see the module's docs)."""
    parser = argparse.ArgumentParser(
        prog="python -m tritium.frontends.kserve_grpc",
        description="Say which transport the gRPC endpoint uses here (native gRPC C++ or grpc.aio) and why.",
    )
    parser.add_argument(
        "--transport", choices=TRANSPORTS, default="auto", help="[frontends.grpc] transport (default: auto)"
    )
    parser.add_argument(
        "--require-native", action="store_true", help="exit 1 when the native transport cannot load here"
    )
    args = parser.parse_args(argv)
    choice = transport_choice(args.transport)
    print(f"gRPC transport: {choice.line}")
    print(f"with --grpc-use-ssl: {transport_choice(args.transport, tls=True).line}")
    if args.require_native:
        native, reason = load_native_transport()
        if native is None:
            print(f"error: the native transport is not available ({reason})", file=sys.stderr)
            return 1
    return 0 if choice.kind else 1


if __name__ == "__main__":
    sys.exit(main())
