"""How much a secret resists guessing: an estimate in bits that charges nothing for the
structure a guesser tries first (runs, counting sequences, a repeated block)."""

from __future__ import annotations

import math
import string

# Words that mark a value copied from an example rather than generated.
PLACEHOLDERS = ("replace", "change", "example", "placeholder", "secret", "password", "token")
MIN_SECRET_BITS = 128.0
GENERATE = "generate one: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
OTHER_SIZE = 33  # printable ASCII that is not a letter or digit


def _alphabet_bits(value: str) -> float:
    """log2 of the alphabet a guesser must try: the classes of character the value uses."""
    size = sum(len(c) for c in CLASSES if any(ch in c for ch in value))
    if any(not any(ch in c for c in CLASSES) for ch in value):
        size += OTHER_SIZE
    return math.log2(max(size, 2))


def _predictable(value: str, i: int) -> bool:
    """Whether character i follows from the two before it: a run (`aaaa`), a step of one
    (`abcd`, `4321`), or the third character in a row that repeats a block seen 2-8
    characters earlier (`abcdabcd`). Two in a row are left alone: random tokens have them."""
    if i < 2:
        return False
    if value[i] == value[i - 1] == value[i - 2]:
        return True
    step = ord(value[i]) - ord(value[i - 1])
    if abs(step) == 1 and step == ord(value[i - 1]) - ord(value[i - 2]):
        return True
    return any(
        all(value[i - k] == value[i - k - p] for k in range(3))
        for p in range(2, 9)
        if i - 2 - p >= 0
    )


def estimated_bits(value: str) -> float:
    """Bits a guesser faces: the alphabet's bits for each character not predictable from
    the ones before it. `0123456789abcdef` scores about 21, `abcd`×8 about 19, a 16-byte
    `secrets.token_hex` 134 or more and a 32-byte `secrets.token_urlsafe` about 250."""
    free = sum(1 for i in range(len(value)) if not _predictable(value, i))
    return free * _alphabet_bits(value)


def secret_weakness(value: str) -> str | None:
    """Why `value` is not fit to guard the service, or None."""
    lowered = value.lower()
    if any(word in lowered for word in PLACEHOLDERS):
        return f"looks like a placeholder; {GENERATE}"
    if len(value) < 16:
        return "must be at least 16 characters"
    bits = estimated_bits(value)
    if bits < MIN_SECRET_BITS:
        return (
            f"is too predictable (about {bits:.0f} bits estimated, at least "
            f"{MIN_SECRET_BITS:.0f} needed); {GENERATE}"
        )
    return None
