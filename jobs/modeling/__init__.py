"""Models and tokenizers: loading a model from its source, an adapter folder as its verified
base plus the adapter (`model.py`); safetensors model folders, the bundled model and the
errors of a model that cannot be had (`folders.py`); LoRA adapters (`adapters.py`, peft); the
random presets, real tokenizers from local packages, and image inputs for vision-language
models (`vision.py`, no torch at import: the service checks images with it)."""
