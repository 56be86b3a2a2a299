"""Listing models reads each model's versions and aliases in a fixed number of queries
(no query per model): `/v1/models` on the control plane and in serving use it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from service.store import Database, migrate
from service.store.models import ModelStore


def add_model(store: ModelStore, name: str, owner: str, versions: int) -> None:
    for _ in range(versions):
        number = store.reserve_version(name, owner)
        store.add_version(
            name,
            number,
            job_id=f"job-{name}-{number}",
            source=f"/runs/{name}/{number}",
            artifact=f"registry/{name}/v{number}",
            files={"model.safetensors": "0" * 64},
            spec={},
            dataset={},
            metrics={},
        )


def test_listings_take_three_queries_however_many_models(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'numtune.db'}")
    migrate(db.engine)
    store = ModelStore(db)
    for i in range(6):
        add_model(store, f"m{i}", "ann" if i % 2 else "bob", versions=i % 3 + 1)
    store.set_alias("m1", "production", 1)
    store.set_alias("m1", "canary", 2)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(db.engine, "before_cursor_execute", count)
    everything = store.listings()
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 3
    assert [entry.model.name for entry in everything] == [f"m{i}" for i in range(6)]
    assert [len(entry.versions) for entry in everything] == [1, 2, 3, 1, 2, 3]
    assert [v.version for v in everything[2].versions] == [1, 2, 3]  # oldest first

    anns = store.listings("ann")
    assert [entry.model.name for entry in anns] == ["m1", "m3", "m5"]
    assert anns[0].aliases == {"production": 1, "canary": 2} and anns[1].aliases == {}
    assert [entry.model.name for entry in store.listings(name="m4")] == ["m4"]
    assert store.listings("ann", name="m4") == []  # bob's
