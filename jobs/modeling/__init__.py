"""Models and tokenizers: the random presets, real tokenizers from local packages, loading a
model from its source (`model.py`), LoRA adapters (`adapters.py`, peft) and image inputs for
vision-language models (`vision.py`, no torch at import: the service checks images with it)."""
