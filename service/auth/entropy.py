"""How much a secret resists guessing, judged twice: by zxcvbn (Dropbox's estimator, MIT),
which knows the structure a guesser tries first (dictionary words and passphrases,
keyboard walks, dates, repeats, sequences), and by an estimate in bits that charges the
alphabet's bits for each character not predictable from the two before it. A value that is
hex or base64 of printable text is judged as that text as well: encoding
`fake-token-fake-token` hides nothing from a guesser.

zxcvbn prices a character it finds no pattern in at 10 guesses, so a generated 16-byte
token_hex scores 94-106 bits there (1,500 drawn) while it has 128: its floor is
MIN_ZXCVBN_BITS, which no generated token comes near and which the keyboard walk
`qwertyuiopasdfghjklzxcvbnm123456` (40 bits) and the passphrase
`correcthorsebatterystaplecorrecthorse` (73) do not reach (issue 45, N13).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import string

from zxcvbn import zxcvbn

# Words that mark a value copied from an example rather than generated.
PLACEHOLDERS = ("replace", "change", "example", "placeholder", "secret", "password", "token")
MIN_SECRET_BITS = 128.0
MIN_ZXCVBN_BITS = 80.0
GENERATE = "generate one: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
OTHER_SIZE = 33  # printable ASCII that is not a letter or digit
# zxcvbn's matching grows faster than the length (0.1 s at 35 characters, 0.3 s at 64 on a
# loaded core); a secret's first 64 characters are plenty to judge.
JUDGED_CHARS = 64


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


@functools.lru_cache(maxsize=32)  # every app start judges its tokens; tests start hundreds
def zxcvbn_bits(value: str) -> tuple[float, str]:
    """log2 of zxcvbn's guesses for the value's first JUDGED_CHARS characters, and its
    warning ("" when it has none)."""
    judged = zxcvbn(value[:JUDGED_CHARS])
    warning = str(judged["feedback"].get("warning") or "").rstrip(".")
    return float(judged["guesses_log10"]) * math.log2(10), warning


def decoded_text(value: str) -> str | None:
    """The printable text `value` encodes as hex or base64 (standard or URL-safe), if it
    does; a generated secret encodes random bytes, which are not printable text."""
    raw: list[bytes] = []
    if len(value) % 2 == 0 and all(ch in string.hexdigits for ch in value):
        raw.append(bytes.fromhex(value))
    padded = value + "=" * (-len(value) % 4)
    for altchars in (None, b"-_"):
        try:
            raw.append(base64.b64decode(padded, altchars=altchars, validate=True))
        except (binascii.Error, ValueError):
            continue
    for data in raw:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(text) >= 4 and text.isprintable():
            return text
    return None


def secret_weakness(value: str) -> str | None:
    """Why `value` is not fit to guard the service, or None."""
    decoded = decoded_text(value)
    forms = [(value, "")] if decoded is None else [(value, ""), (decoded, " once decoded")]
    for text, how in forms:
        if any(word in text.lower() for word in PLACEHOLDERS):
            return f"looks like a placeholder{how}; {GENERATE}"
    if len(value) < 16:
        return "must be at least 16 characters"
    for text, how in forms:
        bits, warning = zxcvbn_bits(text)
        if bits < MIN_ZXCVBN_BITS:
            because = f": {warning}" if warning else ""
            return (
                f"is too predictable{how} (zxcvbn: about {bits:.0f} bits, at least "
                f"{MIN_ZXCVBN_BITS:.0f} needed{because}); {GENERATE}"
            )
        bits = estimated_bits(text)
        if bits < MIN_SECRET_BITS:
            return (
                f"is too predictable{how} (about {bits:.0f} bits estimated, at least "
                f"{MIN_SECRET_BITS:.0f} needed); {GENERATE}"
            )
    return None
