"""`optim.precision: auto`: mixed bfloat16 where the CPU computes bfloat16 natively, float32 elsewhere.

mixed_bfloat16 runs the conv encoder and decoder (and the reward head) in bfloat16. It pays
only on CPUs with bfloat16 instructions (AVX512-BF16 or AMX: a pixel update 1.2-1.8x faster);
elsewhere TensorFlow emulates bfloat16 and the same update ran 11-14x slower (README,
"Which precision when"). `auto` therefore reads the CPU's flags from /proc/cpuinfo, and
keeps float32 for state observations (no convolutions, nothing to gain) and when a GPU is
visible (the flags say nothing about it). The choice is logged once per process.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
PRECISIONS = ("auto", "float32", "mixed_bfloat16")

log = logging.getLogger(__name__)
_logged: set[tuple[str, str]] = set()


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags of the first CPU in `cpuinfo` (default: /proc/cpuinfo; empty where unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: nothing known, so no native bfloat16 assumed
            return set()
    match = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    return set(match.group(1).split()) if match else set()


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
    native = [flag for flag in NATIVE_BFLOAT16_FLAGS if flag in cpu_flags(cpuinfo)]
    if obs_key != "image":
        choice, reason = "float32", "state observations have no conv encoder/decoder to speed up"
    elif gpu:
        choice, reason = "float32", "a GPU is visible and auto decides from the CPU's flags only; set it explicitly"
    elif native:
        choice, reason = "mixed_bfloat16", f"the CPU has native bfloat16 instructions ({', '.join(native)})"
    else:
        choice, reason = "float32", "the CPU has no native bfloat16 instructions (avx512_bf16, amx_bf16): emulated is slower"
    if (choice, reason) not in _logged:
        _logged.add((choice, reason))
        log.info("optim.precision auto -> %s: %s", choice, reason)
    return choice
