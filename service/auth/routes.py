"""/v1/tokens: admins create, list and revoke bearer tokens."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.auth import use_cases as ops
from service.auth.callers import Admin
from service.deps import GateDep, TokensDep
from service.jobs.schemas import TokenCreate, TokenCreated, TokenOut

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, tokens: TokensDep, _: Admin) -> TokenCreated:
    """A new token for `owner` with `scopes`; the secret is in this response only."""
    row, secret = tokens.create(body.owner, list(body.scopes), body.name)
    return TokenCreated(**TokenOut.of(row).model_dump(), token=secret)


@router.get("", response_model=list[TokenOut])
def list_tokens(tokens: TokensDep, _: Admin) -> list[TokenOut]:
    return [TokenOut.of(r) for r in tokens.all()]


@router.delete("/{token_id}", status_code=204)
def revoke_token(token_id: str, tokens: TokensDep, gate: GateDep, _: Admin) -> Response:
    ops.revoke(tokens, gate, token_id)
    return Response(status_code=204)
