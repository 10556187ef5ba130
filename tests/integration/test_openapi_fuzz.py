"""schemathesis against the OpenAPI document tritium serves (``GET /v2/openapi.json``).

Every operation of the document is called with bodies and path parameters
generated from its schemas (and from outside them); the only check is
schemathesis' ``not_a_server_error``: client input never gets a 5xx. The
model named in model paths is the module's ``echo`` (so that generated
bodies reach the request checks, not just "unknown model"). A
final test asks that the server is still serving, with no traceback logged.
Bounded (derandomized, a few dozen examples per operation) to well under a
minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from tests.support.clients import http_call, module_server  # noqa: E402
from tests.support.repo import add_model, identity_config  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))

    args = ["--max-request-bytes=1048576", "--model-control-mode=explicit", "--load-model=*"]
    yield from module_server(tmp_path_factory.mktemp("openapi"), build, args)


@pytest.fixture(scope="module")
def api_schema(server: ServerProcess) -> Any:
    return schemathesis.openapi.from_url(f"http://{server.http_url}/v2/openapi.json")


def _operations() -> list[tuple[str, str]]:
    from tritium.frontends.kserve_http.openapi import document

    return [(method, path) for path, item in document()["paths"].items() for method in item]


@pytest.mark.parametrize("method, path", _operations())
def test_no_server_error_for_any_generated_request(api_schema: Any, method: str, path: str) -> None:
    operation = api_schema[path][method.upper()]

    @given(case=operation.as_strategy())
    @settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        if case.path_parameters and "model_name" in case.path_parameters:
            case.path_parameters["model_name"] = "echo"  # the bodies are the target: send them to a real model
        case.call_and_validate(checks=[not_a_server_error])

    run()


def test_the_document_is_served_and_the_server_survived(server: ServerProcess) -> None:
    status, headers, body = http_call(server, "GET", "/v2/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json" and b'"openapi":"3.0.3"' in body
    assert http_call(server, "GET", "/v2/health/ready")[0] == 200
    assert "Traceback" not in server.log()
