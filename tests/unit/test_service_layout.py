"""service/ is grouped by what it does, and its import rules leave nothing out.

- Directly under `service/` only the glue: the app factory, the settings, the process's
  services, the typed dependencies routes take and the errors every part raises (≤ 6 modules
  with `__init__.py`); everything else lives in a feature package.
- `.importlinter`'s `service-layers` contract places every module of `service/` (but `__init__`
  glue and the packages it places whole), so a new module cannot sit outside the order.
- The control plane's contracts (no torch, Ray only through the backend, never the serving
  replica) list every child of `service/` but the serving replica and the command line.
- No module of `service/` or `jobs/` climbs out of its package from `Path(__file__)` (the
  checkout's bench/results, examples/ or root): an installed copy has none of them.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "service"
GLUE = {"__init__.py", "app.py", "settings.py", "services.py", "deps.py", "errors.py"}
NOT_CONTROL_PLANE = {"service.serving", "service.cli"}


def contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    return parser


def listed(contract: str, key: str) -> list[str]:
    value = contracts()[f"importlinter:contract:{contract}"][key]
    return [line.strip() for line in value.splitlines() if line.strip()]


def children() -> set[str]:
    """service's direct children as modules: `service.app`, `service.jobs`, ..."""
    names = {p.stem for p in SERVICE.glob("*.py") if p.name != "__init__.py"}
    names |= {p.name for p in SERVICE.iterdir() if (p / "__init__.py").exists()}
    return {f"service.{name}" for name in names}


def test_only_glue_sits_directly_under_service() -> None:
    modules = {p.name for p in SERVICE.glob("*.py")}
    assert modules, "service/ has no modules: the test would check nothing"
    assert modules <= GLUE, (
        f"modules directly under service/ that belong in a package: {modules - GLUE}"
    )
    assert len(modules) <= 6


def test_every_service_module_has_a_row_in_the_layers_contract() -> None:
    rows = listed("service-layers", "layers")
    placed = {name.strip() for row in rows for name in row.replace("|", ":").split(":")}
    whole = {name for name in placed if (ROOT / name.replace(".", "/") / "__init__.py").exists()}
    assert {"service.store", "service.cli"} <= whole  # the rule below has packages to skip
    missing = []
    for path in sorted(SERVICE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__init__.py" or "migrations" in path.parts:
            continue
        if module not in placed and not any(module.startswith(f"{w}.") for w in whole):
            missing.append(module)
    assert not missing, f"modules of service/ without a row in service-layers: {missing}"


def test_the_control_plane_contracts_list_every_package() -> None:
    expected = children() - NOT_CONTROL_PLANE
    assert len(expected) >= 10
    for contract in ("control-plane-no-torch", "control-plane-ray"):
        assert set(listed(contract, "source_modules")) == expected, contract
    assert set(listed("control-plane-never-serving", "source_modules")) == expected


def test_the_serving_replica_has_a_contract_of_its_own() -> None:
    assert listed("serving-imports", "source_modules") == ["service.serving"]
    forbidden = set(listed("serving-imports", "forbidden_modules"))
    assert {"service.app", "service.jobs", "service.queue", "service.*.routes"} <= forbidden


CLIMB = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent\b)+|\.parents\[(\d+)\])")


def levels_up(source: str) -> list[int]:
    """How many folders each `Path(__file__)...parent(s)` in `source` climbs."""
    return [
        int(m.group(2)) + 1 if m.group(2) else m.group(1).count(".parent")
        for m in CLIMB.finditer(source)
    ]


def test_the_climb_finder_counts_both_spellings() -> None:
    assert levels_up("Path(__file__).resolve().parents[2] / 'x'") == [3]
    assert levels_up("Path(__file__).parent.parent") == [2]
    assert levels_up("Path(__file__).with_name('a')") == []


def test_no_module_climbs_out_of_its_package() -> None:
    out = []
    for package in ("service", "jobs"):
        for path in sorted((ROOT / package).rglob("*.py")):
            depth = len(path.relative_to(ROOT).parts) - 1  # folders between the file and ROOT
            if any(up > depth for up in levels_up(path.read_text())):
                out.append(str(path.relative_to(ROOT)))
    assert not out, f"modules that reach outside their package from __file__: {out}"
