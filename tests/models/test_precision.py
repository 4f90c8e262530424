"""`optim.precision: auto`: decided from the CPU's flags (fake /proc/cpuinfo text here), explicit values kept."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

from planet_sac.config import ConfigError, ModelConfig
from planet_sac.config_loading import apply_overrides, load_config
from planet_sac.models import precision
from planet_sac.models.precision import cpu_flags, cpu_vendor, resolve_precision
from planet_sac.models.world_model import WorldModel
from tests.conftest import CONFIGS

# Two processors of an AMD EPYC with AVX512-BF16 (trimmed), and of one with AVX2 only.
BF16_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu vme sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni clzero
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu vme sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni clzero
"""
AMX_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
# An Intel Xeon (model 207) under KVM: AVX512-BF16 without AMX, where mixed_bfloat16 measured 1.36x slower.
INTEL_BF16_CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
                      "flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16 avx512_fp16 avx_vnni\n")
AVX2_CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx avx2 fma bmi2\n"


@pytest.fixture(autouse=True)
def no_isa_cap(monkeypatch):
    """The decisions below are about the fake CPUs only: this process's ONEDNN_MAX_CPU_ISA is set per test."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)


def test_cpu_vendor_is_read_from_the_first_processor():
    assert cpu_vendor(BF16_CPUINFO) == "AuthenticAMD"
    assert cpu_vendor(INTEL_BF16_CPUINFO) == "GenuineIntel"
    assert cpu_vendor(AVX2_CPUINFO) == ""  # no vendor line: unknown


def test_cpu_flags_are_read_from_the_flags_line():
    assert {"avx2", "avx512_bf16", "clzero"} <= cpu_flags(BF16_CPUINFO)
    assert "avx512_bf16" not in cpu_flags(AVX2_CPUINFO)
    assert cpu_flags("processor\t: 0\n") == set()  # no flags line: nothing assumed


@pytest.mark.parametrize("cpuinfo, expected", [(BF16_CPUINFO, "mixed_bfloat16"), (AMX_CPUINFO, "mixed_bfloat16"),
                                               (INTEL_BF16_CPUINFO, "float32"), (AVX2_CPUINFO, "float32"), ("", "float32")])
def test_auto_takes_mixed_bfloat16_for_images_only_with_native_bfloat16(cpuinfo, expected):
    assert resolve_precision("auto", "image", cpuinfo, gpu=False) == expected
    assert resolve_precision("auto", "state", cpuinfo, gpu=False) == "float32"  # no convolutions to speed up
    assert resolve_precision("auto", "image", cpuinfo, gpu=True) == "float32"  # the CPU's flags say nothing of a GPU


@pytest.mark.parametrize("explicit", ["float32", "mixed_bfloat16"])
def test_explicit_precisions_are_kept_whatever_the_cpu(explicit):
    for cpuinfo in (BF16_CPUINFO, AVX2_CPUINFO):
        assert resolve_precision(explicit, "image", cpuinfo, gpu=False) == explicit


def test_the_choice_is_logged_once(monkeypatch, caplog):
    monkeypatch.setattr(precision, "_logged", set())
    with caplog.at_level(logging.INFO, logger="planet_sac.models.precision"):
        for _ in range(3):
            resolve_precision("auto", "image", BF16_CPUINFO, gpu=False)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["optim.precision auto -> mixed_bfloat16: the CPU computes bfloat16 natively (avx512_bf16 on AMD)"]


def test_intel_avx512_bf16_without_amx_says_why_it_keeps_float32(monkeypatch, caplog):
    monkeypatch.setattr(precision, "_logged", set())
    with caplog.at_level(logging.INFO, logger="planet_sac.models.precision"):
        assert resolve_precision("auto", "image", INTEL_BF16_CPUINFO, gpu=False) == "float32"
    assert "avx512_bf16 without AMX" in caplog.records[0].getMessage()


@pytest.mark.parametrize("flags, vendor, dtype", [({"avx2", "avx512_bf16"}, "AuthenticAMD", tf.bfloat16),
                                                  ({"avx2", "avx512_bf16"}, "GenuineIntel", tf.float32),
                                                  ({"avx2", "amx_bf16"}, "GenuineIntel", tf.bfloat16),
                                                  ({"avx2"}, "AuthenticAMD", tf.float32)])
def test_world_model_in_auto_computes_its_convolutions_as_the_cpu_allows(monkeypatch, flags, vendor, dtype):
    monkeypatch.setattr(precision, "cpu_flags", lambda cpuinfo=None: flags)
    monkeypatch.setattr(precision, "cpu_vendor", lambda cpuinfo=None: vendor)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    model = WorldModel(ModelConfig(cnn_depth=4, deter_size=8, stoch_size=4, hidden_size=8), "image", (64, 64, 3), 1,
                       precision="auto")
    assert model.encoder.compute_dtype == dtype and model.decoder.compute_dtype == dtype
    assert model.precision == {tf.bfloat16: "mixed_bfloat16", tf.float32: "float32"}[dtype]


def test_config_defaults_to_auto_and_rejects_unknown_precisions():
    config = load_config(CONFIGS / "default.yaml")
    assert config.optim.precision == "auto"
    for value in ("auto", "float32", "mixed_bfloat16"):
        assert apply_overrides(config, [f"optim.precision={value}"]).optim.precision == value
    with pytest.raises(ConfigError, match="optim.precision"):
        apply_overrides(config, ["optim.precision=bfloat16"])


@pytest.mark.parametrize("value, expected", [("AVX2", "AVX2"), ("avx2", "AVX2"), (" avx512_core_bf16 ", "AVX512_CORE_BF16"),
                                             ("AVX10_1_512_AMX", "AVX512_CORE_AMX"), ("ALL", None), ("", None),
                                             ("AVX3000", None)])
def test_the_onednn_isa_cap_is_read_as_onednn_reads_it(value, expected):
    assert precision.onednn_isa_cap({"ONEDNN_MAX_CPU_ISA": value}) == expected
    assert precision.onednn_isa_cap({}) is None


@pytest.mark.parametrize("cap, hidden", [(None, set()), ("AVX2", {"avx512_bf16", "amx_bf16"}),
                                         ("AVX512_CORE_VNNI", {"avx512_bf16", "amx_bf16"}),
                                         ("AVX512_CORE_BF16", {"amx_bf16"}), ("AVX512_CORE_FP16", {"amx_bf16"}),
                                         ("AVX512_CORE_AMX", set())])
def test_a_cap_hides_the_bfloat16_flags_above_it(cap, hidden):
    flags = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    assert precision.usable_flags(flags, cap) == flags - hidden


def test_auto_under_an_avx2_cap_keeps_float32_as_on_an_avx2_cpu(monkeypatch, caplog):
    """`ONEDNN_MAX_CPU_ISA=AVX2` stands in for an AVX2-only CPU: auto must choose what it chooses there."""
    monkeypatch.setattr(precision, "_logged", set())
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    with caplog.at_level(logging.INFO, logger=precision.__name__):
        assert resolve_precision("auto", "image", BF16_CPUINFO, gpu=False) == "float32"
        assert resolve_precision("auto", "image", AMX_CPUINFO, gpu=False) == "float32"
    assert "ONEDNN_MAX_CPU_ISA=AVX2 hides" in caplog.text
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert resolve_precision("auto", "image", AMX_CPUINFO, gpu=False) == "mixed_bfloat16"


def test_explicit_bfloat16_under_a_cap_that_hides_its_kernels_is_one_line(monkeypatch):
    """TensorFlow would pick oneDNN's bfloat16 kernels (the CPU has them) that the cap hides: a segfault."""
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    with pytest.raises(ConfigError, match="ONEDNN_MAX_CPU_ISA=AVX2") as raised:
        resolve_precision("mixed_bfloat16", "image", BF16_CPUINFO, gpu=False)
    assert "\n" not in str(raised.value)
    assert resolve_precision("mixed_bfloat16", "image", AVX2_CPUINFO, gpu=False) == "mixed_bfloat16"  # emulated
    assert precision.bfloat16_crashes(BF16_CPUINFO) and not precision.bfloat16_crashes(AVX2_CPUINFO)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert not precision.bfloat16_crashes(BF16_CPUINFO)
