"""The random presets (`random:<preset>`): tiny models built from config, deterministic in
their seed, each paired with a real tokenizer (jobs/modeling/tokenizers.py).

tiny-*    a 2-layer, 64-wide Llama (the embedding is most of it: vocab × 64)
vlm-tiny  a Llava (transformers' LlavaForConditionalGeneration): a random 2-layer CLIP vision
          tower on 32 × 32 images in 4-px patches (64 patch positions, CLS dropped), its
          two-layer projector, and the tiny-char Llama; the character tokenizer gains one
          special token, "<image>" (id 99), which a prompt repeats 64 times where the
          projected patches go (jobs/modeling/vision.py, jobs/data/tokenize.py)
"""

from __future__ import annotations

import copy
from functools import lru_cache

import torch
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlamaForCausalLM,
    LlavaConfig,
    LlavaForConditionalGeneration,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from jobs.modeling.tokenizers import TokenizerName, load_tokenizer
from jobs.modeling.vision import IMAGE_TOKEN
from jobs.spec import VISION_PRESETS

PRESET_TOKENIZERS: dict[str, TokenizerName] = {
    "tiny-digit": "smollm2",
    "tiny-qwen": "qwen2.5",
    "tiny-llama3": "llama3",
    "tiny-gpt2": "gpt2",
    "tiny-char": "char",
    "tiny-char3": "char3",
    "vlm-tiny": "char",
}


def _tiny_config(tokenizer: PreTrainedTokenizerBase) -> LlamaConfig:
    # Small enough to train on a laptop core; the embedding is most of it (vocab × 64).
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _vlm_config(tokenizer: PreTrainedTokenizerBase) -> LlavaConfig:
    image_token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert isinstance(image_token, int)  # one token in, one id out
    # 32 × 32 images in 4-px patches: 64 patch positions (CLS dropped) → 64 image tokens of
    # the 64-wide text model; the tower is as small as the text model (2 layers, 64 wide).
    vision = CLIPVisionConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=32,
        patch_size=4,
        projection_dim=64,
    )
    return LlavaConfig(
        vision_config=vision,
        text_config=_tiny_config(tokenizer),
        image_token_index=image_token,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        image_seq_length=64,
        tie_word_embeddings=True,
    )


@lru_cache(maxsize=len(PRESET_TOKENIZERS))
def preset_tokenizer(preset: str) -> PreTrainedTokenizerBase:
    """A random preset's tokenizer (shared: do not mutate it); a vision preset's has the
    image placeholder token as its last id."""
    base = load_tokenizer(PRESET_TOKENIZERS[preset])
    if preset not in VISION_PRESETS:
        return base
    tokenizer = copy.deepcopy(base)  # load_tokenizer's copy is shared by text presets
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    return tokenizer


def random_model(preset: str, seed: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = preset_tokenizer(preset)
    # The same seed gives the same weights without disturbing the caller's RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: PreTrainedModel
        if preset in VISION_PRESETS:
            model = LlavaForConditionalGeneration(_vlm_config(tokenizer))
        else:
            model = LlamaForCausalLM(_tiny_config(tokenizer))
    return model, tokenizer
