"""The Ray Train job: the driver that builds the TorchTrainer and writes `result.json`
(`runner.py`) and the worker loop it runs (`loop.py`, numbered steps: the worker's context in
`worker.py`, the held-out evaluation and the reports in `evaluation.py`), the process group's
loopback rendezvous (`rendezvous.py`), the step engines (DDP in `engine.py`, DeepSpeed ZeRO in
`zero.py`, their optimizer and schedule in `optim.py`), checkpoints, the metrics log and the
divergence check."""
