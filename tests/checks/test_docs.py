"""The documentation site builds offline with `mkdocs build --strict` (a broken link, a page
missing from the files or an API docstring that no longer resolves fails it), and its
generated pages cover what they are generated from: every route of the control plane's
OpenAPI schema, every JSON in bench/results."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docs.tooling import rest, results
from service.app import create_app
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

ADMIN = "adm_Xk3pL9vQ2mW7rT5nB8yC4jH6fD1gS0aZ"


def schema_routes(home: Path) -> list[tuple[str, str]]:
    """(METHOD, path) of every operation in the app's OpenAPI schema and in the committed
    snapshot (tests/unit/openapi_snapshot.json) together."""
    app = create_app(Settings(home=home, admin_token=ADMIN), reconcile=False)
    snapshot = json.loads((ROOT / "tests" / "unit" / "openapi_snapshot.json").read_text())
    return sorted(
        {(m.upper(), p) for schema in (app.openapi(), snapshot) for m, p in rest.routes(schema)}
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def test_the_site_builds_strict_with_every_section(site: Path) -> None:
    for page in ("index.html", "security/index.html", "concepts/losses/index.html",
                 "reference/python/index.html", "results/accuracy/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    python_api = (site / "reference/python/index.html").read_text()
    assert "compute_loss_func" in python_api and "num_items_in_batch" in python_api


def test_rest_reference_lists_every_route(site: Path, tmp_path: Path) -> None:
    page = html.unescape((site / "reference/rest/index.html").read_text())
    routes = schema_routes(tmp_path)
    assert len(routes) >= 30
    missing = [f"{m} {p}" for m, p in routes if f"<code>{m} {p}</code>" not in page]
    assert not missing, f"routes the REST reference does not list: {missing}"


def test_rest_reference_renders_types_and_parameters() -> None:
    schema = {
        "info": {"version": "9"},
        "paths": {"/v1/x/{id}": {"get": {
            "summary": "Get X",
            "parameters": [{"name": "id", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": {"description": "OK"}},
        }}},
        "components": {"schemas": {"T": {}, "X": {
            "properties": {"tags": {"type": "array", "items": {"$ref": "#/components/schemas/T"}},
                           "mode": {"enum": ["a", "b"]}},
            "required": ["tags"],
        }}},
    }  # fmt: skip
    page = rest.render(schema)
    assert "### `GET /v1/x/{id}`" in page
    assert "| `id` | path | string | yes |" in page
    assert "| `tags` | array of [`T`](#t) | yes |" in page
    assert "| `mode` | `a` \\| `b` | no |" in page


def test_every_benchmark_json_has_a_results_page() -> None:
    pages = results.pages()
    committed = sorted(results.RESULTS.glob("*.json"))
    assert len(committed) >= 20, results.RESULTS  # no JSON found would check nothing
    for path in committed:
        family = path.stem.split("-", 1)[0]
        assert f"## `{path.name}`" in pages[f"results/{family}.md"], path.name
        assert f"[{family}]({family}.md)" in pages["results/index.md"]


def test_json_fields_and_records_become_tables() -> None:
    lines = results.json_markdown(
        {"model": "m", "run": {"step_s": 0.123456, "ok": True}, "rows": [{"a": 1, "b": [1, 2]}]}
    )
    assert "| `model` | m |" in lines
    assert "| `run.step_s` | 0.1235 |" in lines
    assert "| a | b |" in lines and "| 1 | 1, 2 |" in lines
