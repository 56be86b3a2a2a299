"""The serving application: one Ray Serve deployment whose FastAPI ingress answers numeric
queries (`/v1/predict`) and the OpenAI API (`/v1/completions`, `/v1/chat/completions`,
`/v1/models`) from registered model versions.

    python -m service.serving.deploy deploy --port 8000 [--address 127.0.0.1:PORT]

A request names a model by reference ("arith@production", "arith:3"); the ingress checks
the caller's bearer token (the control plane's tokens, same database), resolves the
reference to an immutable version for that caller, and hands the work to the batcher.
Versions load through Serve's multiplexing (an LRU of `max_models_per_replica` per
replica), and each load verifies every artifact file's sha256 first: a changed file is a
409, never served. With batching on, requests that arrive within `batch_wait_s` are
grouped by (model, options) and each group is one `predict`/`complete` call.

This module must not use `from __future__ import annotations`: Serve's ingress rebuilds
the route methods' signatures and FastAPI must see real types there.
"""

import asyncio
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from ray import serve

from jobs.infer import InferenceRequestError, NumericPredictor
from jobs.modeling.adapters import BaseChangedError, BaseMissingError
from jobs.modeling.folders import ModelUnavailableError
from service import errors
from service.auth.access import TokenGate, admit
from service.registry import ArtifactError, ModelNotFound, ModelVersion, Registry
from service.serving.adapters import AdapterHost, engine_config, turn_with
from service.serving.api import (
    PredictRequest,
    PredictResponse,
    ReplicaConfig,
    Work,
    samples_used_for,
)
from service.serving.calibrate_run import calibrate_in_slices
from service.serving.calibration import CalibrateRequest, plan, served
from service.serving.limits import (
    BATCHES,
    Body,
    FairTurns,
    check_budget,
    read_body,
    run_groups,
    timed_call,
)
from service.serving.loopback import keep_internal_grpc_on_loopback
from service.serving.openai_api import (
    ChatRequest,
    CompletionRequest,
    chat_body,
    completion_body,
    error_body,
    model_entry,
    streamed,
)
from service.serving.uploaded import UploadedImages
from service.serving.versions import ResolvedVersions
from service.store import Database, Principal, TokenStore

log = logging.getLogger(__name__)

# Errors a caller can act on, as (status, code); anything else is a 500 "internal".
MODEL_ERRORS: dict[type[Exception], tuple[int, str]] = {
    ModelNotFound: (404, "not_found"),
    ArtifactError: (409, "artifact_refused"),
    # An adapter version whose base is gone or is not the one it was trained on (checked
    # before the general model error: they are ModelUnavailableErrors too).
    BaseMissingError: (409, "base_missing"),
    BaseChangedError: (409, "base_changed"),
    ModelUnavailableError: (409, "model_unavailable"),
    InferenceRequestError: (422, "invalid_request"),
}
FAILURES = tuple(MODEL_ERRORS)
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]


# No public schema or docs: the routes read their bodies themselves (after the token), and
# README.md documents them.
app = FastAPI(
    title="numtune serving", version="0.1.0", openapi_url=None, docs_url=None, redoc_url=None
)
errors.install(app, error_body)


async def _model_error(request: Request, error: Exception) -> JSONResponse:
    status, code = next(v for t, v in MODEL_ERRORS.items() if isinstance(error, t))
    return JSONResponse(error_body(request, code, errors.bounded(str(error))), status)


for _kind in MODEL_ERRORS:
    app.add_exception_handler(_kind, _model_error)


@serve.deployment(name="NumtuneServing")
@serve.ingress(app)
class NumtuneServing:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = ReplicaConfig.model_validate(config)
        if self.config.serve.host == "127.0.0.1":
            keep_internal_grpc_on_loopback()
        db = Database(self.config.database_url)
        self.registry = Registry(db, self.config.storage_root, Path(self.config.cache_dir))
        self.gate = TokenGate(TokenStore(db), self.config.token_cache_s)
        self.uploaded = UploadedImages(db, self.config.storage_root)  # images named by file id
        # References resolved once into typed records; loads take the resolved record.
        self.versions = ResolvedVersions(self.registry, self.config.token_cache_s)
        # torch's RNG is process-global (seeded sampling) and the replica's CPUs are its
        # own: one model call at a time per replica, batched or not, owners taking turns.
        self.turns = FairTurns()
        # A thread per model call waiting for its turn: batches run concurrently, and a
        # later batch's calls must reach the turns while an earlier one's still wait there.
        self.waiting = ThreadPoolExecutor(self.config.serve.max_ongoing_requests, "turn")
        serve_cfg = self.config.serve
        # Adapter versions: one base per base, adapters beside; in the serving dtype.
        self.adapters = AdapterHost(serve_cfg.dtype, engine_config(serve_cfg))
        # serve.batch's wrapper carries these setters; its type hints do not know them.
        self._batched.set_max_batch_size(serve_cfg.max_batch_size)  # type: ignore[attr-defined]
        self._batched.set_batch_wait_timeout_s(serve_cfg.batch_wait_s)  # type: ignore[attr-defined]

        # The models Serve holds now (it drops evicted ones): what /readyz reports.
        self.loaded = weakref.WeakValueDictionary[str, NumericPredictor]()

        async def load_version(ref: str) -> NumericPredictor:
            predictor = await asyncio.to_thread(self.versions.load, ref, self.adapters)
            self.loaded[ref] = predictor
            return predictor

        self.load = serve.multiplexed(max_num_models_per_replica=serve_cfg.max_models_per_replica)(
            load_version
        )

    def loaded_bases(self) -> dict[str, list[str]]:
        """{base source: adapter versions loaded on it} on this replica (through a handle)."""
        return self.adapters.adapters_on()

    async def _caller(self, credentials: HTTPAuthorizationCredentials | None) -> Principal:
        """The token's principal with the read scope, else 401/403 as the control plane."""
        # Called, not declared as a FastAPI dependency: Serve pickles the app by value to
        # the replica, and a closure from a module with postponed annotations loses the
        # names its annotations need on the way.
        return await admit(self.gate, credentials, "read")

    async def _admit(
        self, request: Request, model: type[Body], credentials: HTTPAuthorizationCredentials | None
    ) -> tuple[Principal, Body]:
        """The guard order of the control plane: token (401/403), then body size (413),
        then parsing (422); nothing is read from an unauthenticated caller."""
        principal = await self._caller(credentials)
        return principal, await read_body(request, model, self.config.serve.max_body_bytes)

    async def _resolve(self, ref: str, principal: Principal) -> ModelVersion:
        return await self.versions.resolve(ref, None if principal.is_admin else principal.owner)

    # ---- batching ---------------------------------------------------------------------------

    async def _run(self, works: list[Work]) -> list[list[Any] | Exception]:
        return await run_groups(
            works, self.load, self._locked, (*FAILURES, errors.APIError),
            self.config.serve.max_request_tokens, self.waiting,
        )  # fmt: skip

    def _locked(self, work: Work, predictor: NumericPredictor, prompts: list[str]) -> list[Any]:
        with turn_with(self.turns, work.owner, predictor):
            return timed_call(work, predictor, prompts, self.config.serve.request_timeout_s)

    async def _checked(
        self,
        version: ModelVersion,
        prompts: list[str],
        *,
        chat: bool,
        rows: int,
        new: int,
        field: str,
        images: list[bytes | None] | None = None,
    ) -> tuple[NumericPredictor, int]:
        """The loaded model, once the prompts (an image's placeholders counted) fit the
        per-request limits (else 422); and the request's cost in token positions."""
        predictor = await self.load(version.ref)
        lengths = predictor.prompt_tokens(prompts, chat=chat, images=images)
        cost = check_budget(
            self.config.serve, lengths, rows_per_prompt=rows, max_new_tokens=new, field=field
        )
        return predictor, cost

    # Concurrent batches, all of them (limits.BATCHES): a request arriving while batches run
    # is queued at the turns at once, and the turns, not a cap, pick the next owner's call.
    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.01, max_concurrent_batches=BATCHES)
    async def _batched(self, works: list[Work]) -> list[list[Any] | Exception]:
        return await self._run(works)

    def _stream(
        self, predictor: NumericPredictor, prompt: str, options: dict[str, Any], model: str,
        owner: str, images: list[bytes | None] | None = None,
    ) -> StreamingResponse:  # fmt: skip
        return streamed(
            predictor, prompt, options, model=model,
            turn=lambda: turn_with(self.turns, owner, predictor),
            timeout_s=self.config.serve.request_timeout_s, failures=FAILURES, images=images,
        )  # fmt: skip

    async def _submit(self, work: Work) -> list[Any]:
        if self.config.serve.batching:
            result = await self._batched(work)
        else:
            [result] = await self._run([work])
        if isinstance(result, Exception):
            raise result
        return result

    # ---- routes -----------------------------------------------------------------------------

    @app.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(self) -> dict[str, Any]:
        """The engine setting; the loaded models decoding on vLLM, and on generate() (vision
        models, adapters above vLLM's LoRA rank, models vLLM cannot run, a failed worker)."""
        on_vllm = sum(p.engine is not None for p in list(self.loaded.values()))
        return {
            "status": "ready", "engine": self.config.serve.engine,
            "models": {"vllm": on_vllm, "hf": len(self.loaded) - on_vllm},
        }  # fmt: skip

    @app.post("/v1/predict", response_model=PredictResponse)
    async def predict(self, request: Request, auth: Bearer) -> PredictResponse:
        who, body = await self._admit(request, PredictRequest, auth)
        # 422 naming images[i] before any model work; file ids read off the loop (SQL).
        images = await asyncio.to_thread(body.decoded_images, self.uploaded.reader(who))
        version = await self._resolve(body.model, who)
        _, cost = await self._checked(
            version, body.prompts, chat=True, rows=body.rows_per_prompt,
            new=body.max_new_tokens, field="prompts", images=images,
        )  # fmt: skip
        how = plan(body, version.calibration)  # the estimate, and the calibrated interval
        work = Work("predict", version.ref, body.prompts, how.options, who.owner, images, cost)
        return PredictResponse(
            model=body.model, version=version.version, ref=version.ref,
            predictions=served(await self._submit(work), how), calibration=how.calibration,
            samples_used_for=samples_used_for(body.samples, how.options["decoding"]),
        )  # fmt: skip

    @app.post("/v1/calibrate")
    async def calibrate(self, request: Request, auth: Bearer) -> dict[str, Any]:
        """Calibrate a version on demand (submit scope: it writes) and store it on the version;
        run in slices between other owners' turns, within a budget and a time limit."""
        who = await admit(self.gate, auth, "submit")
        body = await read_body(request, CalibrateRequest, self.config.serve.max_body_bytes)
        version = await self._resolve(body.model, who)
        predictor = await self.load(version.ref)
        calibration = await calibrate_in_slices(
            body, predictor, version.recorded_spec, config=self.config.serve,
            turn=lambda: turn_with(self.turns, who.owner, predictor),
            gone=request.is_disconnected,
        )  # fmt: skip
        record = calibration.model_dump()
        await asyncio.to_thread(
            self.registry.store.set_calibration, version.name, version.version, record
        )
        self.versions.forget()  # this replica serves it at once; others within token_cache_s
        return {"ref": version.ref, "calibration": record}

    @app.post("/v1/completions", response_model=None)
    async def completions(
        self, request: Request, auth: Bearer
    ) -> dict[str, Any] | StreamingResponse:
        who, body = await self._admit(request, CompletionRequest, auth)
        version = await self._resolve(body.model, who)
        options = {**body.generation(body.max_tokens), "chat": False}
        predictor, cost = await self._checked(
            version, body.prompts, chat=False, rows=1,
            new=int(options["max_new_tokens"]), field="prompt",
        )  # fmt: skip
        if body.stream:
            if len(body.prompts) != 1:
                raise errors.InvalidRequest("prompt: streaming takes one prompt")
            return self._stream(predictor, body.prompts[0], options, body.model, who.owner)
        work = Work("complete", version.ref, body.prompts, options, who.owner, cost=cost)
        outs = await self._submit(work)
        return completion_body(body.model, outs)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(self, request: Request, auth: Bearer) -> dict[str, Any] | StreamingResponse:
        who, body = await self._admit(request, ChatRequest, auth)
        # A content part's data URL or uploaded image's id, checked: 422 naming the part.
        image = await asyncio.to_thread(body.image, self.uploaded.reader(who))
        images: list[bytes | None] | None = None if image is None else [image]
        version = await self._resolve(body.model, who)
        options = {**body.generation(body.token_budget), "chat": True}
        predictor, cost = await self._checked(
            version, [body.question], chat=True, rows=1,
            new=int(options["max_new_tokens"]), field="messages", images=images,
        )  # fmt: skip
        if body.stream:
            return self._stream(predictor, body.question, options, body.model, who.owner, images)
        work = Work("complete", version.ref, [body.question], options, who.owner, images, cost)
        [out] = await self._submit(work)
        return chat_body(body.model, out)

    @app.get("/v1/models")
    async def models(self, auth: Bearer) -> dict[str, Any]:
        principal = await self._caller(auth)
        owner = None if principal.is_admin else principal.owner
        listings = await asyncio.to_thread(self.registry.listings, owner)  # SQL: off-loop
        data = []
        for listing in listings:
            row = listing.model
            created = int(row.created_at.timestamp())
            refs = [f"{row.name}:{v.version}" for v in listing.versions]
            refs += [f"{row.name}@{alias}" for alias in sorted(listing.aliases)]
            data += [model_entry(ref, created, row.owner) for ref in refs]
        return {"object": "list", "data": data}

    @app.get("/v1/models/{ref}")
    async def model(self, ref: str, auth: Bearer) -> dict[str, Any]:
        version = await self._resolve(ref, await self._caller(auth))
        owner = await asyncio.to_thread(self.registry.model, version.name)  # SQL: off-loop
        return model_entry(ref, int(version.created_at.timestamp()), owner.owner if owner else "")
