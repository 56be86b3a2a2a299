"""The Ray Train job: the worker loop (`loop.py`), its step engines (DDP in `engine.py`,
DeepSpeed ZeRO in `zero.py`), checkpoints, the metrics log, the divergence check, and the
driver that builds the TorchTrainer and writes `result.json` (`runner.py`)."""
