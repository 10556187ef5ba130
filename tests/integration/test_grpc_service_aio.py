"""A part of test_grpc_service.py again, over the grpc.aio transport (``[frontends.grpc] transport = "aio"``).

test_grpc_service.py runs on the default transport: the native one wherever it
is built (and scripts/test.sh makes sure it is where libgrpc++-dev is), so on
the project's machine grpc.aio would otherwise serve those protocol cases only
where another suite forces it (test_grpc_transport.py, test_grpc_budget.py,
test_cancellation.py, test_tls.py, ...). These are the same test functions,
imported, with this module's ``server`` fixture: health, metadata, config,
statistics, streams (in order, decoupled), an aio client's concurrent calls and
a client's deadline. Where the native transport is not built, the two modules
test the same transport.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_grpc_service import (  # noqa: F401 (fixtures and tests, collected here)
    build_repository,
    channel,
    client,
    stub,
    test_aio_client_concurrent_requests,
    test_client_deadline_cancels_and_the_server_goes_on,
    test_decoupled_model_refuses_model_infer,
    test_health_check_serving,
    test_model_config,
    test_model_metadata,
    test_model_metadata_errors,
    test_model_ready,
    test_model_statistics,
    test_server_live_and_ready,
    test_server_metadata,
    test_stream_decoupled_model,
    test_stream_error_message_carries_the_request_id,
    test_stream_responses_and_errors_in_request_order,
)
from tests.support.clients import module_server
from tests.support.grpc_transport import endpoints_cell, transport_line
from tests.support.server import ServerProcess, transport_plugins


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("grpc_service_aio")
    env = transport_plugins(root, "aio")
    yield from module_server(root, build_repository, ["--allow-http=false"], grpc_only=True, env=env)


def test_this_module_runs_over_grpc_aio(server: ServerProcess) -> None:
    assert f"transport: {transport_line('aio')}" in endpoints_cell(server.log())
