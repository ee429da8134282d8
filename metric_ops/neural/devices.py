"""Where the neural metrics (BERTScore, semantic similarity) run: device and precision.

``device="auto"`` (the default) picks the first CUDA device when torch sees one, else the
CPU; ``FACETLAKE_DEVICE`` overrides ``auto`` for a whole process (``cpu``, ``cuda``,
``cuda:1``). fp16 halves the encoder's weights and activations: faster on a GPU, and its
values differ from fp32 by up to ~1e-3, so it is recorded in the metric's signature
(``|dtype:fp16``); on a CPU it is refused (no speed gain, and half-precision matmuls are
slow or missing there).
"""

from __future__ import annotations

import os
from typing import Any
from metric_ops.errors import FacetlakeError

AUTO = "auto"


class DeviceError(FacetlakeError, ValueError):
    """A device or precision that cannot be used here; the message says what to pass instead."""


def _torch() -> Any:
    import torch

    return torch


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA device (False when torch has no CUDA build)."""
    torch = _torch()
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001 - a broken driver counts as no device
        return False


def resolve_device(device: str | None = AUTO) -> str:
    """The torch device string to load an encoder on.

    Args:
        device: ``auto`` / None (``$FACETLAKE_DEVICE`` if set, else ``cuda`` when
            :func:`cuda_available`, else ``cpu``), ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        DeviceError: an unknown device name, or a CUDA device asked for where torch sees none.
    """
    name = (device or AUTO).strip().lower()
    if name == AUTO:
        name = os.environ.get("FACETLAKE_DEVICE", "").strip().lower() or AUTO
    if name == AUTO:
        return "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        return "cpu"
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not cuda_available():
            raise DeviceError(f"device {name!r} asked for but torch sees no CUDA device; use device=auto or device=cpu")
        index = int(name[5:]) if ":" in name else 0
        count = _torch().cuda.device_count()
        if index >= count:
            raise DeviceError(f"device {name!r} asked for but torch sees {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
        return name
    raise DeviceError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")


def resolve_dtype(fp16: bool, device: str) -> str:
    """``float16`` when ``fp16`` on a CUDA ``device``, ``float32`` when not ``fp16``.

    Raises:
        DeviceError: ``fp16`` on the CPU.
    """
    if not fp16:
        return "float32"
    if not device.startswith("cuda"):
        raise DeviceError("fp16 runs only on a CUDA device; drop fp16=true or run where CUDA is present (device=auto)")
    return "float16"
