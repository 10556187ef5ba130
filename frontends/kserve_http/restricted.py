"""``--http-restricted-api``: API groups that answer only requests carrying a header with a value.

``--http-restricted-api=model-repository,statistics:admin-key=secret``
restricts the model repository and statistics endpoints: a request without
``admin-key: secret`` gets Triton's answer, 403 with
``{"error":"This API is restricted, expecting header 'admin-key'"}``
(the same for a wrong value). The groups and the URLs in each are Triton's
(``health``, ``metadata``, ``inference``, ``shared-memory``,
``model-config``, ``model-repository``, ``statistics``, ``trace``,
``logging``). Checked by the endpoint's dispatcher before any handler runs,
so it covers routes added by any module; runs on the core's event loop.
"""

from __future__ import annotations

import re

from .messages import HttpRequest, HttpResponse

__all__ = ["api_group", "restriction_error", "group_refusal"]

_GROUPS = (
    (re.compile(r"^/v2/repository(/|$)"), "model-repository"),
    (re.compile(r"^/v2/(system|cuda)sharedmemory(/|$)"), "shared-memory"),
    (re.compile(r"^/v2/logging$"), "logging"),
    (re.compile(r"^/v2/(models/[^/]+(/versions/[0-9]+)?/)?trace/setting$"), "trace"),
    (re.compile(r"^/v2/models(/[^/]+(/versions/[0-9]+)?)?/stats$"), "statistics"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/(infer|generate|generate_stream)$"), "inference"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/config$"), "model-config"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/ready$"), "health"),
    (re.compile(r"^/v2/health/(live|ready)$"), "health"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?$"), "metadata"),
    (re.compile(r"^/v2/?$"), "metadata"),
)


def api_group(path: str) -> str | None:
    """The restricted-API group of a URL path (None: not in any group)."""
    for pattern, group in _GROUPS:
        if pattern.match(path):
            return group
    return None


def restriction_error(restrictions: dict[str, tuple[str, str]], request: HttpRequest) -> HttpResponse | None:
    """403 when ``request``'s API group is restricted and it lacks the header (None: allowed).

    :param restrictions: group -> (header name, value).
    """
    return group_refusal(restrictions, api_group(request.path), request.headers)


def group_refusal(
    restrictions: dict[str, tuple[str, str]], group: str | None, headers: dict[str, str]
) -> HttpResponse | None:
    """403 when API ``group`` is restricted and ``headers`` (lower-case names) lack its header (None: allowed).

    For endpoints whose URLs are not KServe's (SageMaker's ``/invocations`` is ``inference``).
    """
    rule = restrictions.get(group) if group is not None else None
    if rule is None:
        return None
    header, value = rule
    if headers.get(header.lower()) == value:
        return None
    body = '{"error":"This API is restricted, expecting header \'' + header + "'\"}"
    return HttpResponse(403, body.encode(), content_type="text/plain; charset=utf-8")
