"""What a submitted job may read: its data files and its model, confined per deployment.

A job runs with the Ray workers' access to the host and to storage, so a path in a spec
is a request to read that file with the service's rights. The control plane therefore
accepts only
  - uploaded files (data.file, data.eval_file) the caller may read, written into
    data.path / data.eval_path as their stored location inside the owner's files folder;
  - data files that resolve (after following every symlink) inside the data roots, and
    JSONL rows whose images do too, or that name an image the caller uploaded (purpose
    vision) by its id, pinned into data.images as its stored location: a JSONL file is read
    through at submit (every row parsed, every image opened; streamed, a few files at once),
    so a missing, unreadable or oversized image, one outside the roots, or another owner's
    image id, is a 422 naming the file and line, and nothing is recorded;
  - models that are `bundled:*`, `random:*`, a registry version the caller may read
    (pinned here to its immutable version, its storage folder and its files' sha256, which
    the job checks while it copies them), or a folder resolving inside the model roots.
Accepted paths are rewritten to their resolved form, so a symlink swapped after the check
does not move the job elsewhere. A refused path gets the same message whether or not it
exists, so the answer does not reveal the host's files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobs.data.jsonl import check_rows
from jobs.data.table import check_table
from jobs.data.types import DataError
from jobs.spec import JobSpec, TuneSpec
from service.files.checks import CHECKING_FOR, PASSED, OwnerTurns, uploaded_digest
from service.registry import ModelNotFound, Registry
from service.settings import Settings
from service.store import Principal

Problems = list[dict[str, str]]
# (an uploaded file's id, its purpose: fine-tune or vision) -> its confined stored location,
# or None if the caller has no such file uploaded for that purpose.
FileResolver = Callable[[str, str], str | None]
# Submits reading a JSONL file through at once: each reads it in chunks and keeps no rows,
# and more of them would only share the same cores (the rest wait their turn).
FILE_CHECKS = OwnerTurns(slots=2, per_owner=1)


def inside(value: str, roots: list[Path]) -> Path | None:
    """The resolved path if `value` is absolute and resolves strictly inside a root. A NUL
    byte names no file (the OS would refuse it: ValueError, a 500) and is refused alike."""
    if "://" in value or "\0" in value or not os.path.isabs(value):
        return None
    real = Path(os.path.realpath(value))
    return real if any(real != root and real.is_relative_to(root) for root in roots) else None


def _shown(roots: list[Path]) -> str:
    return ", ".join(str(r) for r in roots)


def confine_data(
    spec: JobSpec, roots: list[Path], resolve: FileResolver, prefix: str
) -> tuple[JobSpec, Problems]:
    problems, update = [], {}
    purpose = "table" if spec.data.task == "table" else "fine-tune"
    if spec.data.images is not None:
        message = "written by the service: name uploaded images in the rows by file id"
        problems.append({"field": f"{prefix}data.images", "message": message})
    for name, id_name in (("path", "file"), ("eval_path", "eval_file")):
        value, file_id = getattr(spec.data, name), getattr(spec.data, id_name)
        if file_id is not None:
            # The location is the service's to write: a path given beside an id is refused,
            # but for the one the service pinned for it (a stored spec posted again).
            where = resolve(file_id, purpose)
            if value is not None and value != where:
                message = f"give data.{name} or data.{id_name}, not both"
                problems.append({"field": f"{prefix}data.{name}", "message": message})
            elif where is None:
                problems.append(
                    {"field": f"{prefix}data.{id_name}", "message": f"no file {file_id!r}"}
                )
            else:
                update[name] = where
            continue
        if value is None or value.startswith("bundled:"):
            continue  # a bundled table: DataSpec knows its name, the job reads its package
        real = inside(value, roots)
        if real is None or not real.is_file():
            message = f"must be an absolute path to a file inside the data roots ({_shown(roots)})"
            problems.append({"field": f"{prefix}data.{name}", "message": message})
        else:
            update[name] = str(real)
    if not problems and spec.data.task == "table":
        problems = _table_problems(update, spec, prefix)
    elif not problems:
        problems = _row_problems(update, spec, roots, resolve, prefix)
    return spec.model_copy(update={"data": spec.data.model_copy(update=update)}), problems


def _table_problems(located: dict[str, Any], spec: JobSpec, prefix: str) -> Problems:
    """A table read through as the job will read it (its columns, every target value), the
    first problem named by file id (or path), row and column; the target's decimals and
    units, declared or inferred, are recorded into `located` (so spec.json says them)."""
    data = spec.data.model_copy(update=located)
    ids = (("path", data.file), ("eval_path", data.eval_file))
    names = {located[n]: file_id for n, file_id in ids if file_id and n in located}
    try:
        with FILE_CHECKS:
            located.update(check_table(data, names))
    except DataError as error:
        named = re.search(r"\bdata\.(target|template|features|units|eval_size)\b", str(error))
        field = named.group(1) if named else "file" if data.file else "path"
        return [{"field": f"{prefix}data.{field}", "message": str(error)}]
    return []


def _row_problems(
    located: dict[str, Any], spec: JobSpec, roots: list[Path], resolve: FileResolver, prefix: str
) -> Problems:
    """The first bad row (or image) of each JSONL file the job would read, by file:line.
    The uploaded images rows name are pinned into `located["images"]`."""
    pinned: dict[str, str] = {}

    def allowed(image: str) -> bool:
        # Inside the roots, a missing image is named as such; outside, the same refusal
        # whether or not it exists.
        return inside(image, roots) is not None

    def image_file(file_id: str) -> str | None:
        # Another owner's image reads as missing: the message does not tell it exists.
        where = pinned[file_id] = resolve(file_id, "vision") or ""
        return where or None

    problems = []
    for name, id_name in (("path", "file"), ("eval_path", "eval_file")):
        where, file_id = located.get(name), getattr(spec.data, id_name)
        if where is None:
            continue
        digest = uploaded_digest(resolve, where)
        try:
            with FILE_CHECKS:
                # This content passed before and names no image (perhaps while we waited).
                if digest not in PASSED:
                    _, images = check_rows(where, allowed, image_file)
                    if digest is not None and not images:
                        PASSED.add(digest)
        except DataError as error:
            # An uploaded file is named by its id, never by where the service stores it.
            message = str(error).replace(where, file_id) if file_id else str(error)
            field = f"{prefix}data.{id_name if file_id else name}"
            problems.append({"field": field, "message": message})
    if any(pinned.values()):
        located["images"] = {k: v for k, v in pinned.items() if v}
    return problems


def confine_model(
    spec: JobSpec, roots: list[Path], registry: Registry, who: Principal, prefix: str
) -> tuple[JobSpec, Problems]:
    source = spec.model.source
    kind, _, rest = source.partition(":")
    if kind in ("bundled", "random"):
        return spec, []  # the validator already checked the name
    field = f"{prefix}model.source"
    if kind == "registry":
        try:
            ref, pinned = registry.pin(rest, None if who.is_admin else who.owner)
        except ModelNotFound as error:
            return spec, [{"field": field, "message": str(error)}]
        model = spec.model.model_copy(update={"source": f"registry:{ref}", "pinned": pinned})
        return spec.model_copy(update={"model": model}), []
    real = inside(source, roots)
    if real is None or not real.is_dir():
        message = (
            "must be bundled:<name>, random:<preset>, registry:<model>@<alias> or "
            f"registry:<model>:<version>, or a folder inside the model roots ({_shown(roots)})"
        )
        return spec, [{"field": field, "message": message}]
    model = spec.model.model_copy(update={"source": str(real)})
    return spec.model_copy(update={"model": model}), []


def confine_job(
    spec: JobSpec,
    settings: Settings,
    registry: Registry,
    who: Principal,
    resolve: FileResolver,
    prefix: str = "",
) -> tuple[JobSpec, Problems]:
    """The spec with its files resolved and its model pinned, or the problems found."""
    checking = CHECKING_FOR.set(who.owner)  # the file checks' turns are this owner's
    try:
        spec, data_problems = confine_data(spec, settings.data_root_paths, resolve, prefix)
    finally:
        CHECKING_FOR.reset(checking)
    spec, model_problems = confine_model(spec, settings.model_root_paths, registry, who, prefix)
    return spec, data_problems + model_problems


def confine(
    spec: JobSpec | TuneSpec,
    settings: Settings,
    registry: Registry,
    who: Principal,
    resolve: FileResolver,
) -> tuple[JobSpec | TuneSpec, Problems]:
    if isinstance(spec, TuneSpec):
        base, problems = confine_job(spec.base, settings, registry, who, resolve, "base.")
        return spec.model_copy(update={"base": base}), problems
    return confine_job(spec, settings, registry, who, resolve)
