"""The numeric vocabulary of a tokenizer: which token ids are numbers, and their values.

Built once per tokenizer. A token is numeric when its text, after removing one leading
space marker (" ", "Ġ" byte-level BPE, "▁" SentencePiece), is a non-empty run of ASCII
digits; its value is that integer and its digit length the run's length ("05" → 5, 2).
The decimal point is the token whose text is exactly "." (DEL places digits after it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import torch

SPACE_MARKERS = (" ", "Ġ", "▁")
DECIMAL_POINT = "."


class NoNumericTokensError(ValueError):
    """The tokenizer has no token that is a plain number: numeric losses cannot apply."""


class HasVocab(Protocol):
    def get_vocab(self) -> Mapping[str, int]: ...


def numeric_text(token: str) -> str | None:
    """The digit string a token stands for, or None when it is not a number token."""
    body = token[1:] if token[:1] in SPACE_MARKERS else token
    # str.isdigit() accepts "²" and Arabic-Indic digits; only ASCII 0-9 count here.
    if body and body.isascii() and body.isdigit():
        return body
    return None


@dataclass(frozen=True, eq=False)
class NumericVocab:
    """Token ids of number tokens, their values and digit lengths (parallel lists, length N),
    and the decimal point's token id (None when the tokenizer has no "." token)."""

    token_ids: list[int]
    values: list[float]
    digit_lengths: list[int] = field(default_factory=list)
    point_id: int | None = None

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        if n == 0:
            raise NoNumericTokensError("the numeric vocabulary is empty: no number tokens")
        if len(self.values) != n or (self.digit_lengths and len(self.digit_lengths) != n):
            raise ValueError("token_ids, values and digit_lengths must have the same length")
        if len(set(self.token_ids)) != n or min(self.token_ids) < 0:
            raise ValueError("token_ids must be unique and non-negative")
        if not all(math.isfinite(v) and v >= 0 for v in self.values):
            raise ValueError("values must be finite and non-negative")
        if self.point_id is not None and (self.point_id < 0 or self.point_id in self.token_ids):
            raise ValueError("point_id must be a non-negative id that is not a number token")
        # Without explicit lengths, a value's length is that of its plain decimal form.
        lengths = self.digit_lengths or [len(str(int(v))) for v in self.values]
        # Kept sorted by token id: the loss finds a target's slot by binary search.
        order = sorted(range(n), key=self.token_ids.__getitem__)
        object.__setattr__(self, "token_ids", [int(self.token_ids[i]) for i in order])
        object.__setattr__(self, "values", [float(self.values[i]) for i in order])
        object.__setattr__(self, "digit_lengths", [int(lengths[i]) for i in order])

    @classmethod
    def from_tokenizer(cls, tokenizer: HasVocab) -> NumericVocab:
        """Scan a Hugging Face tokenizer (anything with `get_vocab()`)."""
        found: list[tuple[int, float, int]] = []
        vocab = tokenizer.get_vocab()
        for token, token_id in vocab.items():
            digits = numeric_text(token)
            if digits is not None:
                found.append((token_id, float(int(digits)), len(digits)))
        if not found:
            name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
            raise NoNumericTokensError(
                f"tokenizer {name!r} has no number tokens (no token is a run of ASCII digits);"
                " numeric losses need at least one"
            )
        found.sort()
        ids, values, lengths = zip(*found, strict=True)
        return cls(list(ids), list(values), list(lengths), vocab.get(DECIMAL_POINT))

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def size(self) -> int:
        return len(self.token_ids)

    @property
    def digits_only(self) -> bool:
        """The number tokens are exactly the ten digits 0-9, one token each."""
        return sorted(self.values) == [float(d) for d in range(10)] and set(self.digit_lengths) == {
            1
        }

    def ids_tensor(self, device: torch.device | str | None = None) -> torch.Tensor:
        """[N] long: vocabulary ids of the numeric tokens."""
        return torch.tensor(self.token_ids, dtype=torch.long, device=device)

    def values_tensor(self, device: torch.device | str | None = None) -> torch.Tensor:
        """[N] float32: the value of each numeric token."""
        return torch.tensor(self.values, dtype=torch.float32, device=device)

    def lengths_tensor(self, device: torch.device | str | None = None) -> torch.Tensor:
        """[N] long: digit length of each numeric token (place value in multi-token numbers)."""
        return torch.tensor(self.digit_lengths, dtype=torch.long, device=device)

    def slot_lookup(
        self, vocab_size: int, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """[V] long: the slot (0..N-1) of each vocabulary id in the numeric slice, -1 elsewhere."""
        if max(self.token_ids) >= vocab_size:
            raise ValueError(
                f"numeric token id {max(self.token_ids)} is outside a vocabulary of {vocab_size}"
            )
        lookup = torch.full((vocab_size,), -1, dtype=torch.long, device=device)
        lookup[self.ids_tensor(device)] = torch.arange(len(self), device=device)
        return lookup
