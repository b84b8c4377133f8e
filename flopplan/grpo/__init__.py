"""The torch GRPO units shared by the built-in trainer (train/), calibration (calibrate/) and engine meters
(engines/): text codecs and the built-in task, batching and padding as TRL lays it out, the phase units (generate,
score, update), the GRPO loss and the rewards. ``config`` and ``codecs`` stay torch-free; the rest import torch."""
