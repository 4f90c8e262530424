"""`optim.precision: auto`: mixed bfloat16 where the CPU computes bfloat16 natively and faster, float32 elsewhere.

mixed_bfloat16 runs the conv encoder and decoder (and the reward head) in bfloat16. `auto` reads the vendor and
flags from /proc/cpuinfo and chooses mixed_bfloat16 for image observations with `amx_bf16`, or `avx512_bf16` on
an AMD CPU; float32 for state observations (no convolutions, nothing to gain), on every other CPU (bfloat16
emulated or measured slower) and when a GPU is visible (the flags say nothing about it). Where
`ONEDNN_MAX_CPU_ISA` caps oneDNN below an instruction set (e.g. `AVX2`, to stand in for an AVX2-only CPU), the
flags it hides count as absent. The choice is logged once per process. The measurements behind these rules are
in docs/performance.md, "Which precision when".
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Mapping

from planet_sac.config import ConfigError

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


# oneDNN's ISA names in increasing order (AVX10_1_512 is AVX512_CORE_FP16's newer name, AVX10_1_512_AMX
# AVX512_CORE_AMX's); `ONEDNN_MAX_CPU_ISA` set to one of them hides every later one.
_ONEDNN_ISAS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
                "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16")
_ISA_ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
                "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16"}
_FLAG_ISA = {"avx512_bf16": "AVX512_CORE_BF16", "amx_bf16": "AVX512_CORE_AMX"}
"""The oneDNN ISA each bfloat16 flag needs."""


def onednn_isa_cap(environ: Mapping[str, str] | None = None) -> str | None:
    """The ISA `ONEDNN_MAX_CPU_ISA` (in `environ`, default this process's) caps oneDNN at, upper case with aliases
    resolved; None for no cap, `ALL`, or a value oneDNN does not know (which it ignores too)."""
    value = (os.environ if environ is None else environ).get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    value = _ISA_ALIASES.get(value, value)
    return value if value in _ONEDNN_ISAS else None


def usable_flags(flags: set[str], isa_cap: str | None) -> set[str]:
    """`flags` without the bfloat16 flags whose oneDNN ISA lies above `isa_cap` (None: all usable)."""
    if isa_cap is None:
        return set(flags)
    level = _ONEDNN_ISAS.index(isa_cap)
    return {flag for flag in flags if flag not in _FLAG_ISA or _ONEDNN_ISAS.index(_FLAG_ISA[flag]) <= level}


def bfloat16_crashes(cpuinfo: str | None = None) -> bool:
    """Whether TensorFlow's bfloat16 ops crash in this process: the CPU (`cpuinfo`, default /proc/cpuinfo) has
    bfloat16 instructions, so TensorFlow picks oneDNN's bfloat16 kernels, but this process's `ONEDNN_MAX_CPU_ISA`
    hides them from oneDNN (a segfault at the first bfloat16 matmul, TensorFlow 2.21). A CPU without such
    instructions emulates bfloat16 instead."""
    flags = cpu_flags(cpuinfo) & set(_FLAG_ISA)
    return bool(flags) and not usable_flags(flags, onednn_isa_cap())


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

    `cpuinfo` (the text of /proc/cpuinfo) and `gpu` (whether TensorFlow sees a GPU) default to this machine's;
    flags that `ONEDNN_MAX_CPU_ISA` hides from oneDNN count as absent (`usable_flags`).

    Raises:
        ConfigError: For `mixed_bfloat16` where it would crash (`bfloat16_crashes`).
    """
    if precision == "mixed_bfloat16" and bfloat16_crashes(cpuinfo):
        raise ConfigError(f"optim.precision=mixed_bfloat16 with ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA')}: "
                          "TensorFlow would run oneDNN's bfloat16 kernels, which that cap hides (it crashes); "
                          "use optim.precision=float32 or auto, or unset ONEDNN_MAX_CPU_ISA")
    if precision != "auto":
        return precision
    if gpu is None:
        import tensorflow as tf

        gpu = bool(tf.config.list_physical_devices("GPU"))
    flags = usable_flags(cpu_flags(cpuinfo), onednn_isa_cap())
    fast = fast_bfloat16(flags, cpu_vendor(cpuinfo))
    if obs_key != "image":
        choice, reason = "float32", "state observations have no conv encoder/decoder to speed up"
    elif gpu:
        choice, reason = "float32", "a GPU is visible and auto decides from the CPU's flags only; set it explicitly"
    elif fast:
        choice, reason = "mixed_bfloat16", f"the CPU computes bfloat16 natively ({fast})"
    elif cpu_flags(cpuinfo) & set(_FLAG_ISA) - flags:
        choice, reason = "float32", f"ONEDNN_MAX_CPU_ISA={onednn_isa_cap()} hides the CPU's bfloat16 instructions"
    elif "avx512_bf16" in flags:
        choice, reason = "float32", "avx512_bf16 without AMX on this vendor was measured slower than float32"
    else:
        choice, reason = "float32", "the CPU has no native bfloat16 instructions (avx512_bf16, amx_bf16): emulated is slower"
    if (choice, reason) not in _logged:
        _logged.add((choice, reason))
        log.info("optim.precision auto -> %s: %s", choice, reason)
    return choice
