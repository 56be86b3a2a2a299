"""A job's row before it is inserted: its id, its spec's digest (the idempotency check) and
its queued state. JobStore.create inserts one; a study's expansion inserts many at once."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from typing import Any

from service.store.schema import JobRow, SpecIn


def now() -> datetime:
    return datetime.now(UTC)


def spec_digest(kind: str, spec: dict[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, "spec": spec}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_job_id(kind: str) -> str:
    """`<kind>-<16 hex>`: also for a job whose files are written before its row."""
    return f"{kind}-{secrets.token_hex(8)}"


def new_job(
    *,
    kind: str,
    name: str,
    owner: str,
    spec: SpecIn,
    key: str | None = None,
    meta: dict[str, Any] | None = None,
) -> JobRow:
    """A queued job's row, not yet inserted (JobStore.create, or a study's expansion)."""
    stamp = now()
    stored = spec if isinstance(spec, dict) else spec.model_dump(mode="json")
    row = JobRow(
        id=new_job_id(kind),
        kind=kind,
        name=name,
        owner=owner,
        spec_json=stored,
        spec_sha256=spec_digest(kind, stored),
        idempotency_key=key,
        status="queued",
        version=0,
        created_at=stamp,
        updated_at=stamp,
        metrics_count=0,
        log_chars=0,
        meta=meta,
    )
    if not isinstance(spec, dict):
        row.keep_spec(spec)
    return row
