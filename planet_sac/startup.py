"""What has to happen before TensorFlow is imported (log levels, devices, a quiet import), and how it computes once imported.

TensorFlow's C++ side prints start-up lines that say nothing about a run and scare
newcomers (measured with tensorflow 2.21 on a CPU-only machine, each import prints the
first three twice, once per shared library):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... port.cc:153] oneDNN custom operations are on. ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    I0000 ... cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use ...
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error ...

`TF_CPP_MIN_LOG_LEVEL=2` removes only `cpu_feature_guard` (INFO after log set-up);
`CUDA_VISIBLE_DEVICES=` removes nothing (cuInit is still called);
`TF_ENABLED_DEVICE_TYPES=CPU` removes the `cuInit` error, so it is set only when the
machine has no NVIDIA driver (no GPU could be used anyway) and the user did not set it.
The absl lines before `absl::InitializeLog` ignore every environment variable, so
`import_tensorflow` sends file descriptor 2 to a temporary file during the import and
prints back whatever is not one of these known INFO/WARNING lines.

This module must not import TensorFlow at import time (see planet_sac/__init__.py).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from types import ModuleType

_DEFAULTED: set[str] = set()
"""Environment variables planet_sac set because the user had not."""

_ABSL_PREINIT = re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$")
_ABSL_INFO_OR_WARNING = re.compile(r"^[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_CPU_FEATURES_CONTINUATION = re.compile(r"^To enable the following instructions: .* rebuild TensorFlow")


def _has_nvidia_driver() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def set_environment_defaults() -> None:
    """Quiet TensorFlow logging, no CUDA probe without an NVIDIA driver, no SDL display probe without a display.

    Variables the user has set are left as they are.
    """
    defaults = {
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # oneDNN kernels halve the time of PlaNet's conv encoder/decoder on CPU; this TensorFlow build leaves them off.
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "MUJOCO_GL": "egl",
    }
    if not _has_nvidia_driver():
        defaults["TF_ENABLED_DEVICE_TYPES"] = "CPU"
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # gymnasium renders classic-control frames with pygame; without a display SDL prints
        # "error: XDG_RUNTIME_DIR is invalid or not set" unless it uses its dummy video driver.
        defaults["SDL_VIDEODRIVER"] = "dummy"
    for key, value in defaults.items():
        if key not in os.environ:
            os.environ[key] = value
            _DEFAULTED.add(key)


def use_verbose_environment() -> None:
    """`--verbose`: TensorFlow logs everything and probes CUDA as it would on its own."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    if "TF_ENABLED_DEVICE_TYPES" in _DEFAULTED:
        del os.environ["TF_ENABLED_DEVICE_TYPES"]
        _DEFAULTED.discard("TF_ENABLED_DEVICE_TYPES")


def is_startup_noise(line: str) -> bool:
    """True for TensorFlow/absl INFO and WARNING start-up lines; errors and anything else are kept."""
    return bool(_ABSL_PREINIT.match(line) or _ABSL_INFO_OR_WARNING.match(line) or _CPU_FEATURES_CONTINUATION.match(line))


def import_tensorflow(quiet: bool = True) -> ModuleType:
    """Imports TensorFlow; with `quiet`, its C++ start-up INFO/WARNING lines are dropped from stderr."""
    if "tensorflow" in sys.modules or not quiet:
        import tensorflow

        return tensorflow
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode(errors="replace").splitlines() if not is_startup_noise(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr)
    return tensorflow


def make_tensorflow_deterministic() -> None:
    """Makes TensorFlow's results a function of its inputs in this process (docs/determinism.md).

    Op determinism on: deterministic kernels only, and an error for an op that has none. Grappler, TensorFlow's
    graph optimizer, off: with it on, the compiled gradient of a pixel world model at PlaNet's batch (16 x 50
    chunks) differed from call to call in its last bits, on the same weights and inputs, and whole runs of the
    same seed drifted apart; with it off they repeat, and an update was as fast (research/determinism_pixels.py).
    Both are process-wide and apply to functions compiled from now on. Every command of the command line that
    runs TensorFlow calls it first, and so does `Trainer` (for runs started from Python).
    """
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
