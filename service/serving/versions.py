"""A serving replica's model references: resolved once, loaded from what was resolved.

A request's reference ("arith@production", "arith") is resolved at the ingress into the
registry's typed record (service/registry/record.py: spec parsed, calibration typed), cached
per (reference, caller) for `token_cache_s`. Serve's multiplexing then loads by the record's
immutable "name:N", and the load takes the record the ingress resolved: no second lookup for
the verified copy, no spec.json read for the predictor. A cold load is one resolve.
"""

from __future__ import annotations

import asyncio
import logging

from jobs.infer import NumericPredictor
from service.auth.access import TTLCache
from service.registry import ModelVersion, Registry
from service.serving.adapters import AdapterHost, checkpoint_spec

log = logging.getLogger(__name__)
MAX_RECORDS = 10_000  # records kept by "name:N" for loads; forgotten all at once past this


class ResolvedVersions:
    def __init__(self, registry: Registry, ttl_s: float) -> None:
        self.registry = registry
        self.refs = TTLCache(ttl_s)  # (reference, owner or None) -> ModelVersion
        # "name:N" -> the record last resolved for it. A version's files and spec never
        # change, so a record is good for loading however old; only its calibration can be
        # stale, and requests read that from `refs`.
        self._records: dict[str, ModelVersion] = {}

    async def resolve(self, ref: str, owner: str | None) -> ModelVersion:
        """`ref` as `owner` may see it (None: everyone's), from the cache or one lookup."""
        found, version = self.refs.get((ref, owner))
        if not found:
            version = await asyncio.to_thread(self.registry.resolve, ref, owner)  # SQL: off-loop
            self.refs.put((ref, owner), version)
        if len(self._records) >= MAX_RECORDS:
            self._records.clear()
        self._records[version.ref] = version
        return version

    def forget(self) -> None:
        """Drop the cached lookups (a version's calibration changed); records stay."""
        self.refs.clear()

    def load(self, ref: str, host: AdapterHost) -> NumericPredictor:
        """Version `ref` ("name:N") from a verified copy of its files, with the record the
        ingress resolved (looked up here only when Serve loads one no request resolved)."""
        version = self._records.get(ref)
        if version is None:
            version = self.registry.resolve(ref)  # access was checked at the ingress
        # Only the listed files, each hashed as it is copied, or ArtifactError.
        with self.registry.verified_copy(version) as folder:
            log.info("loading %s from a verified copy", ref)
            # An adapter: onto its shared base; the spec as the record parsed it.
            return host.load(version.ref, folder, checkpoint_spec(version))
