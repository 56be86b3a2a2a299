"""The REST reference page, rendered from the control plane's own OpenAPI schema.

The app is built the way `numtune api` builds it, minus the reconciler (building the schema
needs no Ray and no database rows), in a throwaway home folder with a random admin token.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Any

METHODS = ("get", "post", "put", "patch", "delete")
Schema = dict[str, Any]


def _cell(text: object) -> str:
    """One table cell: a single line with no bare pipe."""
    return " ".join(str(text).split()).replace("|", "\\|")


def type_of(schema: Schema) -> str:
    """A schema's type in a few characters: `JobSpec`, `string`, `array of TokenOut`."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{name.lower()})"  # the anchor of its heading under Schemas
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    if schema.get("type") == "array":
        return "array of " + type_of(schema.get("items", {}))
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    return str(schema.get("type", "any"))


def operation(method: str, path: str, op: Schema) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [op["summary"], ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required |", "|---|---|---|---|"]
        lines += [
            f"| `{p['name']}` | {p['in']} | {_cell(type_of(p.get('schema', {})))} "
            f"| {'yes' if p.get('required') else 'no'} |"
            for p in params
        ]
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Body ({media}): {type_of(content.get('schema', {}))}", ""]
    responses = op.get("responses", {})
    for code, resp in responses.items():
        if int(code) < 400:
            schemas = [c.get("schema", {}) for c in resp.get("content", {}).values()]
            body = f": {type_of(schemas[0])}" if schemas and schemas[0] else ""
            lines += [f"{code} {_cell(resp.get('description', ''))}{body}", ""]
    errors = [code for code in responses if int(code) >= 400]
    if errors:
        lines += ["Errors: " + ", ".join(errors) + " (see [Errors](#errors)).", ""]
    return lines


def errors_table(schema: Schema) -> list[str]:
    """Each error status any route declares, once, with what it means."""
    meaning: dict[str, str] = {}
    for path, method in ((p, m) for m, p in routes(schema)):
        for code, resp in schema["paths"][path][method].get("responses", {}).items():
            if int(code) >= 400:
                meaning.setdefault(code, _cell(resp.get("description", "")))
    rows = [f"| {code} | {text} |" for code, text in sorted(meaning.items())]
    return ["## Errors", "", "| status | meaning |", "|---|---|", *rows, ""]


def schema_section(name: str, schema: Schema) -> list[str]:
    lines = [f"### `{name}`", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    if props:
        lines += ["| field | type | required | about |", "|---|---|---|---|"]
        lines += [
            f"| `{field}` | {_cell(type_of(prop))} | {'yes' if field in required else 'no'} "
            f"| {_cell(prop.get('description', ''))} |"
            for field, prop in props.items()
        ]
        lines.append("")
    return lines


def routes(schema: Schema) -> list[tuple[str, str]]:
    """Every (method, path) the schema declares, in its order."""
    return [(m, p) for p, ops in schema["paths"].items() for m in METHODS if m in ops]


def render(schema: Schema) -> str:
    lines = [
        "# REST reference",
        "",
        f"The control plane's API, version {schema['info'].get('version', '?')}, generated "
        "from its OpenAPI schema at build time. Every route but `/healthz` needs a bearer "
        "token (see the security model). Serving (`/v1/predict` and the OpenAI-compatible "
        "routes on the serving port) is described under Concepts › Serving.",
        "",
        "## Routes",
        "",
    ]
    for method, path in routes(schema):
        lines += operation(method, path, schema["paths"][path][method])
    lines += errors_table(schema)
    lines += ["## Schemas", ""]
    for name, component in schema["components"]["schemas"].items():
        lines += schema_section(name, component)
    return "\n".join(lines)


def app_schema() -> Schema:
    from service.app import create_app
    from service.settings import Settings

    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), admin_token=secrets.token_urlsafe(32))
        return create_app(settings, reconcile=False).openapi()


def page() -> str:
    return render(app_schema())
