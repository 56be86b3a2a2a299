"""A schemathesis campaign driven through Hypothesis: every operation of an OpenAPI schema
gets a bounded number of generated requests (schema-valid and schema-invalid), and what
they were answered is recorded: each 5xx as a report with the request as curl, each reply
that does not conform to the schema (status code, content type, body) without stopping the
search, so that it can never hide a 5xx.

schemathesis' pytest loader for a fixture-provided schema
(`schemathesis.pytest.from_fixture`) fails on pytest 9.2 (it reads `Node._nodeid`, gone
in 9.2), and a module-level `from_url` would need the server before collection. So this
drives schemathesis' documented `APIOperation.as_strategy` with Hypothesis directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# Per operation and mode. ~30 operations: the control plane's campaign takes ~40 s on 2
# idle cores.
MAX_EXAMPLES = 20
CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance]


@dataclass
class Campaign:
    operations: list[str]
    base_url: str = ""
    sent: dict[str, int] = field(default_factory=dict)  # "<op> [<pass>]" -> requests
    statuses: dict[str, set[int]] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)  # one report per op and pass
    # (operation, failure title, status) -> one example report
    nonconforming: dict[tuple[str, str, int], str] = field(default_factory=dict)


def can_be_invalid(raw: dict[str, Any]) -> bool:
    """Whether a schema-invalid request exists: a body, or a parameter constrained beyond
    "any string". (Asking Hypothesis anyway costs seconds per operation to give up.)"""
    if "requestBody" in raw:
        return True
    for parameter in raw.get("parameters", []):
        schema = {k: v for k, v in parameter.get("schema", {}).items() if k != "title"}
        if schema != {"type": "string"}:
            return True
    return False


def run(
    operation: Any,
    mode: GenerationMode,
    base_url: str,
    out: Campaign,
    path_parameters: dict[str, str] | None = None,
    *,
    headers: dict[str, str],
) -> None:
    """Send `operation` up to MAX_EXAMPLES generated requests of `mode` (on the existing
    resources `path_parameters` name, if given) and record in `out` what they were
    answered: a 5xx stops the operation's search, a nonconforming reply does not."""
    key = f"{operation.label} [{'existing' if path_parameters else mode.value}]"
    out.sent[key], out.statuses[key] = 0, set()
    strategy = operation.as_strategy(
        generation_mode=mode, headers=headers, path_parameters=path_parameters
    )

    # No shrinking: a report already carries the failing request as a curl command, and
    # shrinking HTTP cases can take minutes. derandomize: the same cases on every run.
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        out.sent[key] += 1
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        out.statuses[key].add(response.status_code)
        case.validate_response(response, checks=[not_a_server_error], headers=headers)
        try:
            case.validate_response(response, checks=CONFORMANCE, headers=headers)
        except FailureGroup as group:
            for failure in group.exceptions:
                where = (operation.label, failure.title, response.status_code)
                out.nonconforming.setdefault(where, str(group))

    try:
        check()
    except FailureGroup as group:
        out.server_errors.append(f"{key}\n{group}")
    except Unsatisfiable:
        # Safety net for can_be_invalid(): nothing schema-invalid to send is not a failure.
        if mode is GenerationMode.POSITIVE:
            raise
