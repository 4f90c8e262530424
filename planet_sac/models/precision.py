"""`optim.precision: auto`: mixed bfloat16 where the CPU's bfloat16 path was measured faster, float32 elsewhere.

mixed_bfloat16 runs the conv encoder and decoder (and the reward head) in bfloat16. Measured on the
update of `configs/dmc_vision_cpu_v1.yaml` (docs/performance.md, "Which precision when"):
- AMD EPYC with AVX512-BF16: 1.2-1.8x faster;
- Intel Xeon with AVX512-BF16 but no AMX (AMX hidden by the hypervisor): 1.32x *slower*, so
  AVX512-BF16 alone counts only on AMD;
- AVX2 only: TensorFlow emulates bfloat16, 11-14x slower.
AMX (`amx_bf16`) is the unit Intel built for it and is taken as native. `auto` reads the vendor and
flags from /proc/cpuinfo, and keeps float32 for state observations (no convolutions, nothing to
gain) and when a GPU is visible (the flags say nothing about it). The choice is logged once per process.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

PRECISIONS = ("auto", "float32", "mixed_bfloat16")

log = logging.getLogger(__name__)
_logged: set[tuple[str, str]] = set()


def _cpuinfo(cpuinfo: str | None) -> str:
    """`cpuinfo`, or this machine's /proc/cpuinfo ('' where unreadable: not Linux, nothing known)."""
    if cpuinfo is not None:
        return cpuinfo
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags of the first CPU in `cpuinfo` (default: /proc/cpuinfo; empty where unknown)."""
    match = re.search(r"^flags\s*:(.*)$", _cpuinfo(cpuinfo), re.M)
    return set(match.group(1).split()) if match else set()


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The `vendor_id` of the first CPU in `cpuinfo` (default: /proc/cpuinfo), e.g. `AuthenticAMD`; '' where unknown."""
    match = re.search(r"^vendor_id\s*:\s*(\S+)", _cpuinfo(cpuinfo), re.M)
    return match.group(1) if match else ""


def fast_bfloat16(flags: set[str], vendor: str) -> str | None:
    """Why this CPU's bfloat16 path is faster than float32 (the flag that says so), or None where it is not."""
    if "amx_bf16" in flags:
        return "amx_bf16"
    if "avx512_bf16" in flags and vendor == "AuthenticAMD":
        return "avx512_bf16 on AMD"
    return None


def resolve_precision(precision: str, obs_key: str, cpuinfo: str | None = None,
                      gpu: bool | None = None) -> str:
    """`float32` or `mixed_bfloat16` for `optim.precision`; explicit values pass through, `auto` is decided here.

    `cpuinfo` (the text of /proc/cpuinfo) and `gpu` (whether TensorFlow sees a GPU) default to this machine's.
    """
    if precision != "auto":
        return precision
    if gpu is None:
        import tensorflow as tf

        gpu = bool(tf.config.list_physical_devices("GPU"))
    flags = cpu_flags(cpuinfo)
    fast = fast_bfloat16(flags, cpu_vendor(cpuinfo))
    if obs_key != "image":
        choice, reason = "float32", "state observations have no conv encoder/decoder to speed up"
    elif gpu:
        choice, reason = "float32", "a GPU is visible and auto decides from the CPU's flags only; set it explicitly"
    elif fast:
        choice, reason = "mixed_bfloat16", f"the CPU computes bfloat16 natively ({fast})"
    elif "avx512_bf16" in flags:
        choice, reason = "float32", "avx512_bf16 without AMX on this vendor was measured slower than float32"
    else:
        choice, reason = "float32", "the CPU has no native bfloat16 instructions (avx512_bf16, amx_bf16): emulated is slower"
    if (choice, reason) not in _logged:
        _logged.add((choice, reason))
        log.info("optim.precision auto -> %s: %s", choice, reason)
    return choice
