"""The machine a run trains on: its CPU, which decides the floating-point kernels and so the bits
of a run (same seed, same CPU model, same figures)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name and vector extensions from /proc/cpuinfo (platform.processor()
    elsewhere)."""
    try:
        info = dict(
            line.split(":", 1)
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if ":" in line
        )
    except OSError:
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = set(info.get("flags", "").split())
    vector = (
        ", ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags)
        or "no AVX2"
    )
    return f"{info.get('model name', platform.machine())} ({vector})"
