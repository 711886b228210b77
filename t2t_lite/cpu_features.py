"""What this CPU can compute fast, from its ``/proc/cpuinfo`` flags (no TensorFlow).

The project's machines differ (AVX2 only, or AVX-512 with VNNI and BF16), and the int8 and
bfloat16 paths' speeds depend on it: ``simd_summary`` names the flags that matter for
matmuls, ``has_native_bfloat16`` says whether bfloat16 arithmetic is in hardware.
"""
from __future__ import annotations

import functools
from typing import FrozenSet

SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8")
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.lru_cache(maxsize=None)
def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> FrozenSet[str]:
    """The first CPU's flags in ``cpuinfo_path``; empty where it cannot be read."""
    try:
        with open(cpuinfo_path, encoding="utf-8") as cpuinfo:
            return frozenset(next((line.split(":", 1)[1].split() for line in cpuinfo
                                   if line.startswith("flags")), []))
    except OSError:
        return frozenset()


def simd_summary() -> str:
    """The matmul-relevant SIMD flags joined by ``+``, e.g. ``avx2+fma``; ``unknown``
    without ``/proc/cpuinfo`` flags."""
    flags = cpu_flags()
    if not flags:
        return "unknown"
    return "+".join(flag for flag in SIMD_FLAGS if flag in flags) or "none"


def has_native_bfloat16() -> bool:
    """Whether the CPU has bfloat16 arithmetic instructions (AVX512-BF16 or AMX-BF16)."""
    return any(flag in cpu_flags() for flag in BFLOAT16_FLAGS)
