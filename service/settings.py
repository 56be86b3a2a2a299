"""Service settings: NUMTUNE_* environment variables, then `<home>/config.toml`, then defaults.

Everything local lives under NUMTUNE_HOME (default ~/.numtune): the SQLite database,
storage, logs, PID files and the dev admin token. A cluster deployment points
NUMTUNE_DB_URL at PostgreSQL, NUMTUNE_RAY_ADDRESS at the Ray head's Jobs API and
NUMTUNE_STORAGE at an object store.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from jobs.spec.job import TRACKING_SCHEMES
from jobs.storage.paths import numtune_home
from service.auth.entropy import secret_weakness
from service.queue.ceilings import Ceilings
from service.queue.priorities import PriorityClasses, parse_classes, parse_grants
from service.queue.quotas import QuotaLimit, Quotas, groups_by_owner


class InsecureSettingsError(RuntimeError):
    """The service would start in a way that exposes it without a credential."""


class UnworkableSettingsError(RuntimeError):
    """Settings that cannot work together (several API workers on an in-memory database)."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NUMTUNE_", extra="ignore")

    home: Path = Field(default_factory=numtune_home)
    db_url: str | None = None  # default: sqlite:///<home>/numtune.db
    ray_address: str | None = None  # the Ray head's Jobs API, e.g. http://127.0.0.1:8265
    storage: str | None = None  # folder or pyarrow URI; default <home>/storage
    admin_token: SecretStr | None = None
    # The interpreter a Ray job runs `-m jobs` with. Ours by default (the embedded head
    # runs on this machine); images set it to `python`.
    job_python: str = sys.executable
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    serve_port: int = Field(8000, ge=1, le=65535)
    dev: bool = False
    # API worker processes of `numtune api` (uvicorn workers). Any number may share one
    # database: a lease elects the one that runs the reconciler.
    workers: int = Field(1, ge=1, le=64)
    reconcile_interval_s: float = Field(1.0, gt=0)
    # A job whose Ray head cannot be reached for this long is failed (ray_unreachable)
    # rather than left running forever.
    unreachable_timeout_s: float = Field(300.0, gt=0)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    # POST /v1/studies/resume: a study's kept work (each run's answers under every decoding
    # and its calibration; ~130 KB a run of 64 questions and four decodings).
    max_kept_bytes: int = Field(32 * 2**20, ge=1024)
    # The largest training file /v1/files takes (streamed to storage, never held whole).
    max_upload_bytes: int = Field(100 * 2**20, ge=1024)
    # All of one owner's uploaded files together (NUMTUNE_OWNER_QUOTA_BYTES); an upload
    # past it is a 413 quota_exceeded.
    owner_quota_bytes: int = Field(10 * 2**30, ge=1024)
    # A job's log is copied up to this many characters, then marked truncated.
    max_log_chars: int = Field(20_000_000, ge=1000)
    # Log streams (follow=true): open at once in all and per owner, how often the
    # caller's token is checked again, and how long one stream may last.
    max_log_streams: int = Field(64, ge=1)
    max_log_streams_per_owner: int = Field(8, ge=1)
    log_stream_recheck_s: float = Field(30.0, gt=0)
    log_stream_max_s: float = Field(6 * 3600.0, gt=0)
    # A submission that fails on our side (storage full) is retried with backoff this many
    # times in all, then the job fails (storage_error).
    submit_attempts: int = Field(5, ge=1)
    # Ceilings on what one spec may ask (422 naming the field beyond them), and on how
    # many of one owner's jobs run at once (more wait in the queue).
    max_steps: int = Field(1_000_000, ge=1)  # implied by train.steps or train.epochs
    max_sweep_steps: int = Field(10_000_000, ge=1)  # all trials of one sweep together
    max_trials: int = Field(1_000, ge=1)
    max_workers_per_job: int = Field(16, ge=1)
    # Memory a job's worker processes imply (workers at once × this estimate per worker),
    # refused past max_job_memory_mb: Ray's CPU shares do not bound memory.
    worker_memory_mb: int = Field(512, ge=1)
    max_job_memory_mb: int = Field(8192, ge=1)
    # CPUs of the cluster that jobs never get: the serving replicas' (NUMTUNE_SERVE_MAX_
    # REPLICAS × NUMTUNE_SERVE_REPLICA_CPUS; one CPU in the embedded default). Admission
    # counts them held even before serving starts or scales up.
    reserved_cpus: float = Field(1.0, ge=0)
    # A queued job that cannot start lets smaller ones behind it start (backfill) until it
    # has waited this long; then nothing overtakes it and it gets the next free resources.
    queue_aging_s: float = Field(600.0, ge=0)
    # A job whose workers did not start (Ray Train's start-up timeout) before its first
    # step, or that Ray lost with its head and can go on (a sweep, a job before step 1),
    # goes back to the queue, this many times at most; then it fails.
    start_retries: int = Field(3, ge=0, le=100)
    # How long Ray Train waits for a job's worker group to start (its
    # RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S, given to every job); None: Ray's 60 s.
    worker_start_timeout_s: float | None = Field(None, gt=0)
    # Registration of a succeeded job's checkpoint (service/registry/registrar.py): attempts in all,
    # and the first retry's delay (doubling, capped at 10 minutes).
    registration_attempts: int = Field(8, ge=1, le=100)
    registration_retry_s: float = Field(5.0, gt=0)
    max_running_per_owner: int | None = Field(None, ge=1)
    # While another owner's job waits, one owner's running jobs hold at most this share of
    # the CPUs (and GPUs) jobs may have; their first job always starts. None: no bound.
    owner_share: float | None = Field(0.5, gt=0, le=1)
    # Compute quotas (service/queue/quotas.py): CPU- and GPU-seconds an owner's jobs (a group's
    # together) may use over a rolling window; past it their queued jobs wait, never fail.
    # Defaults for every owner, limits by owner or group name (JSON: {"team-a":
    # {"cpu_seconds": 36000}}), groups as {"team-a": ["alice", "bob"]}. None: no bound.
    quota_window_s: float = Field(86_400.0, gt=0)
    quota_cpu_seconds: float | None = Field(None, gt=0)
    quota_gpu_seconds: float | None = Field(None, gt=0)
    quota_limits: dict[str, QuotaLimit] = Field(default_factory=dict)
    quota_groups: dict[str, list[str]] = Field(default_factory=dict)
    # Priority classes (service/queue/priorities.py): names, lowest first; the class of a job that
    # names none (everyone may use it and those below); who may use the classes above it
    # ("high=alice|bob;urgent=carol"). Preemption: pause lower-class jobs for a higher one.
    priority_classes: str = "low,normal,high"
    priority_default: str = "normal"
    priority_grants: str = ""
    preemption: bool = True
    # Where jobs run: Ray's Jobs API (`ray`), or RayJobs queued by Kueue on Kubernetes
    # (`kuberay`: service/backends/kuberay_backend.py; NUMTUNE_KUBE_* below).
    backend: Literal["ray", "kuberay"] = "ray"
    kube_api: str = "https://kubernetes.default.svc"
    kube_namespace: str = "numtune"
    kube_cluster_queue: str = "numtune"  # its quota is what admission sees as the cluster
    kube_image: str = "numtune/ray:latest"  # the Ray image every RayJob's pods run
    # A bearer token file for the API server; default the pod's service account's.
    kube_token_file: Path | None = None
    # A study's evaluation runs ((arms + ce) × seeds); its sweeps count under max_trials.
    max_study_runs: int = Field(60, ge=1)
    # A study whole: sweep trials over all its sweeps, optimizer steps over all its runs and
    # trials (one POST must not queue 576 trials and ~93M steps, each sweep within bounds).
    max_study_trials: int = Field(256, ge=1)
    max_study_steps: int = Field(20_000_000, ge=1)
    # Every job's wall-clock limit once running (a spec's timeout_s may only be lower).
    max_timeout_s: float | None = Field(7 * 24 * 3600.0, gt=0)
    token_cache_s: float = Field(5.0, ge=0)
    # Folders a job may read data and models from, separated by os.pathsep; a path
    # outside them is refused (one owner must not train on the host's or another's files).
    data_roots: str | None = None  # default <home>/data
    model_roots: str | None = None  # default <home>/models
    # The OpenAPI schema and /docs need a read token unless published on purpose.
    publish_docs: bool = False
    # MLflow tracking of every job and mirror of the registry (jobs/tracking/job.py): a server
    # (http[s]://) or a local store (sqlite:///, file:///). Unset: MLflow is never imported.
    mlflow_uri: str | None = None
    # Other MLflow servers a job's spec may name, as comma-separated origins
    # ("https://mlflow.team-a.example,https://mlflow.team-b.example:5000"). Unset: only the
    # service's own; an arbitrary URL would let any submitter make the Ray nodes call it.
    mlflow_allowed_servers: str | None = None
    # The dashboard's session cookies are encrypted under this key (service/web/session.py).
    # Unset: a random key kept in <home>/session-key (0600), shared by the API workers of
    # this host; several hosts behind one address must all be given the same key.
    session_key: SecretStr | None = None
    # Where the dashboard's Ask page reaches the serving app; default 127.0.0.1:serve_port.
    serve_url: str | None = None
    # The dashboard's Study page: a kept accuracy study (accuracy-<scale>.json, written by
    # bench/study_records.py) or a folder of them; unset, the page shows none.
    study_results: str | None = None

    @field_validator("quota_groups")
    @classmethod
    def _one_group_each(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        groups_by_owner(v)  # an owner in two groups is refused
        return v

    @property
    def quotas(self) -> Quotas:
        return Quotas(
            window_s=self.quota_window_s,
            default=QuotaLimit(
                cpu_seconds=self.quota_cpu_seconds, gpu_seconds=self.quota_gpu_seconds
            ),
            limits=self.quota_limits,
            groups=groups_by_owner(self.quota_groups),
        )

    @model_validator(mode="after")
    def _known_classes(self) -> Settings:
        self.priorities  # noqa: B018 (refuses unknown or repeated names at start)
        return self

    @property
    def priorities(self) -> PriorityClasses:
        names = parse_classes(self.priority_classes)
        if self.priority_default not in names:
            raise ValueError(f"priority_default {self.priority_default!r} is not in {names}")
        grants = parse_grants(self.priority_grants, names)
        return PriorityClasses(names, self.priority_default, grants)

    @field_validator("mlflow_uri")
    @classmethod
    def _tracking_scheme(cls, v: str | None) -> str | None:
        if v and not v.startswith(TRACKING_SCHEMES):
            raise ValueError(f"must start with one of {', '.join(TRACKING_SCHEMES)}")
        return v or None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # An optional config file; the environment wins over it.
        config = Path(os.environ.get("NUMTUNE_CONFIG") or numtune_home() / "config.toml")
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, config))

    @property
    def ceilings(self) -> Ceilings:
        return Ceilings(
            max_steps=self.max_steps,
            max_sweep_steps=self.max_sweep_steps,
            max_trials=self.max_trials,
            max_timeout_s=self.max_timeout_s,
            max_workers_per_job=self.max_workers_per_job,
            worker_memory_mb=self.worker_memory_mb,
            max_job_memory_mb=self.max_job_memory_mb,
            max_study_trials=self.max_study_trials,
            max_study_steps=self.max_study_steps,
        )

    @cached_property
    def database_url(self) -> str:
        return self.db_url or f"sqlite:///{self.home / 'numtune.db'}"

    @cached_property
    def storage_root(self) -> str:
        return self.storage or str(self.home / "storage")

    @cached_property
    def data_root_paths(self) -> list[Path]:
        return _roots(self.data_roots, self.home / "data")

    @cached_property
    def model_root_paths(self) -> list[Path]:
        return _roots(self.model_roots, self.home / "models")

    def check_workers(self) -> None:
        """Refuse several workers where they would not share one set of jobs."""
        if self.workers > 1 and sqlite_in_memory(self.database_url):
            raise UnworkableSettingsError(
                f"--workers {self.workers} with an in-memory SQLite database: each worker "
                "would have a database of its own; use a SQLite file or PostgreSQL "
                "(NUMTUNE_DB_URL), or one worker"
            )

    @property
    def session_key_file(self) -> Path:
        return self.home / "session-key"

    @property
    def serving_url(self) -> str:
        return (self.serve_url or f"http://127.0.0.1:{self.serve_port}").rstrip("/")

    @property
    def on_loopback(self) -> bool:
        return _is_loopback(self.host)

    @property
    def dev_token_file(self) -> Path:
        return self.home / "admin-token"

    def check_secure(self) -> None:
        """Refuse insecure starts: no admin token is allowed only in --dev on loopback."""
        if self.admin_token is not None:
            weakness = secret_weakness(self.admin_token.get_secret_value())
            if weakness:
                raise InsecureSettingsError(f"NUMTUNE_ADMIN_TOKEN {weakness}")
        if self.session_key is not None:
            weakness = secret_weakness(self.session_key.get_secret_value())
            if weakness:
                raise InsecureSettingsError(f"NUMTUNE_SESSION_KEY {weakness}")
        if self.admin_token is None and not self.dev:
            raise InsecureSettingsError(
                "no admin token: set NUMTUNE_ADMIN_TOKEN, or pass --dev to run on 127.0.0.1"
            )
        if self.dev and not _is_loopback(self.host):
            raise InsecureSettingsError(f"--dev binds to 127.0.0.1 only, not {self.host}")


def _roots(value: str | None, default: Path) -> list[Path]:
    """Configured roots, resolved once (a symlinked root is judged by where it points)."""
    parts = [p for p in (value or "").split(os.pathsep) if p.strip()] or [str(default)]
    return [Path(os.path.realpath(Path(p.strip()).expanduser())) for p in parts]


def sqlite_in_memory(url: str) -> bool:
    """`sqlite://`, `sqlite:///:memory:` and `mode=memory` URIs (parsed by hand: the CLI
    imports settings on every command, SQLAlchemy only where it needs the database)."""
    scheme, _, rest = url.partition("://")
    if not scheme.startswith("sqlite"):
        return False
    database = rest.split("?", 1)[0].removeprefix("/")
    return database in ("", ":memory:") or "mode=memory" in rest


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(**overrides: Any) -> Settings:
    return Settings(**overrides)
