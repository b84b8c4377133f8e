"""Where and in what precision model work runs: the device, the dtype, the attention kernel, the bytes per
element a time model reads. One policy for the trainer, calibration and engine meters."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flopplan.errors import UserError

DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str) -> torch.device:
    """``auto`` (a GPU when there is one), ``cpu`` or ``cuda`` (refused when no GPU is available)."""
    if name not in DEVICES:
        raise UserError(f"device must be one of {', '.join(DEVICES)}, not {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available")
    return torch.device(name)


def hardware_name(device: torch.device) -> str:
    """The machine a device names, in the words a profile or a run folder records: the GPU's name, or the CPU's
    model with the threads torch uses (``CPU AMD EPYC 7B13 (2 threads)``): runs of one name share one time model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from flopplan.hardware import cpu_model
    from flopplan.units import plural

    return f"CPU {cpu_model()} ({plural(torch.get_num_threads(), 'thread')})"


@dataclass(frozen=True)
class DevicePolicy:
    """bf16 weights and SDPA attention on a GPU; float32 and eager attention on the CPU, where FlopCounterMode
    counts no SDPA kernel (eager matmuls are what the closed form's ``eager`` convention counts)."""

    device: torch.device

    @staticmethod
    def of(name: str) -> DevicePolicy:
        return DevicePolicy(pick_device(name))

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.on_gpu else torch.float32

    @property
    def attention(self) -> str:
        """The transformers ``attn_implementation``; also the closed form's ``attention_kernel``."""
        return "sdpa" if self.on_gpu else "eager"

    @property
    def bytes_per_element(self) -> float:
        """Bytes per weight and KV-cache element, for the decode roofline."""
        return 2.0 if self.on_gpu else 4.0

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")
