"""The REST contract does not drift by accident: the app's OpenAPI schema (paths, methods,
parameters, responses, every schema's fields, types, defaults and bounds) equals a
committed snapshot. Description texts are left out, so documenting a field never breaks it.

After an intended API change, regenerate the snapshot and review its diff:

    python -m tests.unit.test_openapi_snapshot --write
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

SNAPSHOT = Path(__file__).with_name("openapi_snapshot.json")
ADMIN = "adm_Xk3pL9vQ2mW7rT5nB8yC4jH6fD1gS0aZ"


def without_descriptions(node: Any) -> Any:
    """`node` with every description text removed. Only string values go: a schema's
    property *named* "description" maps to a dict and stays."""
    if isinstance(node, dict):
        return {
            k: without_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def current_schema(home: Path) -> dict[str, Any]:
    # The stub backend and no reconciler: building the schema needs no Ray.
    settings = Settings(home=home, admin_token=ADMIN)
    app = create_app(settings, backend=StubBackend(), reconcile=False)
    schema = app.openapi()
    return {
        "paths": without_descriptions(schema["paths"]),
        "schemas": without_descriptions(schema["components"]["schemas"]),
    }


def test_openapi_matches_snapshot(tmp_path: Path) -> None:
    expected = json.loads(SNAPSHOT.read_text())
    actual = current_schema(tmp_path)
    assert sorted(actual["paths"]) == sorted(expected["paths"])
    for path, methods in expected["paths"].items():
        assert sorted(actual["paths"][path]) == sorted(methods), path
        for method, operation in methods.items():
            assert actual["paths"][path][method] == operation, f"{method.upper()} {path}"
    assert sorted(actual["schemas"]) == sorted(expected["schemas"])
    for name, schema in expected["schemas"].items():
        assert actual["schemas"][name] == schema, name


def write_snapshot() -> None:
    with tempfile.TemporaryDirectory() as home:
        schema = current_schema(Path(home))
    SNAPSHOT.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.unit.test_openapi_snapshot --write")
    write_snapshot()
