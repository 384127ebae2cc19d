import pytest

from sparkctl.core.roofline import (
    SPARK_BANDWIDTH_BYTES_PER_S,
    active_params,
    bits_per_weight_from_quant,
    bits_per_weight_from_size,
    bytes_per_token,
    decode_ceiling_tps,
    roofline,
)


@pytest.mark.parametrize(
    "quant, bits",
    [
        ("Q4_0", 4.5),
        ("Q4_1", 5.0),
        ("Q8_0", 8.5),
        ("F16", 16.0),
        ("BF16", 16.0),
        ("F32", 32.0),
        ("MXFP4", 4.25),
        ("Q4_K_M", 4.85),
        ("Q5_K_M", 5.69),
        ("Q6_K", 6.5625),
        ("q4_k_m", 4.85),  # case-insensitive
        (" Q8_0 ", 8.5),
        ("NVFP4", 4.5),
        ("unknown", None),
        ("", None),
    ],
)
def test_bits_per_weight_from_quant(quant, bits):
    assert bits_per_weight_from_quant(quant) == bits


def test_bits_per_weight_from_size():
    assert bits_per_weight_from_size(4_500_000_000, 8_000_000_000) == pytest.approx(4.5)
    assert bits_per_weight_from_size(1, 0) is None


@pytest.mark.parametrize(
    "params, bits, expected",
    [(8e9, 4.5, 4.5e9), (8e9, 16, 16e9), (3e9, 8.5, 3.1875e9), (0, 4.5, 0.0)],
)
def test_bytes_per_token(params, bits, expected):
    assert bytes_per_token(params, bits) == pytest.approx(expected)


def test_decode_ceiling():
    # 8B at Q4_0 reads 4.5 GB a token: 273 GB/s / 4.5 GB = 60.7 tok/s on a Spark
    assert decode_ceiling_tps(SPARK_BANDWIDTH_BYTES_PER_S, 4.5e9) == pytest.approx(60.666, rel=1e-4)
    with pytest.raises(ValueError):
        decode_ceiling_tps(273e9, 0)


def test_roofline_percent_of_ceiling():
    r = roofline(measured_tps=45.5, active_params=8e9, bits_per_weight=4.5)
    assert r.ceiling_tps == pytest.approx(60.666, rel=1e-4)
    assert r.pct_of_ceiling == pytest.approx(75.0, rel=1e-3)
    assert r.bytes_per_token == pytest.approx(4.5e9)


def test_roofline_kv_reads_lower_the_ceiling():
    r = roofline(None, 8e9, 4.5, bandwidth_bytes_per_s=273e9, kv_bytes_per_token=0.96e9)
    assert r.ceiling_tps == pytest.approx(273e9 / 5.46e9)
    assert r.pct_of_ceiling is None


QWEN3_MOE = {
    "general.architecture": "qwen3moe",
    "general.parameter_count": 30_532_122_624,
    "qwen3moe.block_count": 48,
    "qwen3moe.embedding_length": 2048,
    "qwen3moe.expert_count": 128,
    "qwen3moe.expert_used_count": 8,
    "qwen3moe.expert_feed_forward_length": 768,
}

GPT_OSS = {
    "general.architecture": "gptoss",
    "general.parameter_count": 20_914_757_184,
    "gptoss.block_count": 24,
    "gptoss.embedding_length": 2880,
    "gptoss.expert_count": 32,
    "gptoss.expert_used_count": 4,
    "gptoss.expert_feed_forward_length": 2880,
}


@pytest.mark.parametrize(
    "model_info, total, expected_billions, tol",
    [
        ({"general.architecture": "llama", "general.parameter_count": 8_030_261_248}, None, 8.03, 0.01),
        (QWEN3_MOE, None, 3.35, 0.1),  # published: 3.3B active
        (GPT_OSS, None, 4.2, 0.6),  # published: 3.6B active; the shape formula is approximate
        # no expert sizes: fall back to total x used / count
        ({"general.architecture": "m", "m.expert_count": 8, "m.expert_used_count": 2}, 40_000_000_000, 10.0, 0.01),
        # leading dense layers are not experts
        ({"general.architecture": "d", "d.block_count": 4, "d.leading_dense_block_count": 2,
          "d.embedding_length": 10, "d.expert_feed_forward_length": 10, "d.expert_count": 4,
          "d.expert_used_count": 1}, 10_000, 10_000 - 2 * 4 * 3 * 100 * 0.75, 0),
    ],
)
def test_active_params(model_info, total, expected_billions, tol):
    got = active_params(model_info, total)
    if expected_billions > 1000:  # given in raw units
        assert got == expected_billions
    else:
        assert got / 1e9 == pytest.approx(expected_billions, abs=tol)


def test_active_params_unknown_total():
    assert active_params({"general.architecture": "llama"}) is None


def test_moe_ceiling_on_a_spark():
    # qwen3-30b-a3b at Q8_0: ~3.35B active x 8.5 bits = ~3.6 GB a token -> ~77 tok/s ceiling,
    # above the 60.9 tok/s llama.cpp measured on a Spark.
    r = roofline(60.9, active_params(QWEN3_MOE), bits_per_weight_from_quant("Q8_0"))
    assert 70 < r.ceiling_tps < 85
    assert r.pct_of_ceiling < 100
