"""GPTQ (shrinkray.methods.gptq): error feedback maths, the 4-bit grid, and less output error than round-to-nearest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shrinkray.methods.blockquant import BLOCK_SIZES, quantize_blocks, scale_rounder
from shrinkray.methods.gptq import cholesky, feedback, output_error, quantize_gptq, single_blas_thread

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _correlated(tokens: int, k: int, seed: int, sample: int = 0) -> np.ndarray:
    """Activations whose channels move together (a mixing, fixed by ``seed``, of a few hidden factors), as in
    real layers; ``sample`` draws other tokens from the same distribution."""
    mix = np.random.default_rng(seed).standard_normal((max(1, k // 4), k))
    rng = np.random.default_rng([seed, sample])
    factors = rng.standard_normal((tokens, mix.shape[0]))
    return (factors @ mix + 0.2 * rng.standard_normal((tokens, k))).astype(np.float32)


def _gram(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64.T @ x64 / len(x)


@pytest.mark.parametrize("block", BLOCK_SIZES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_gptq_output_error_is_below_round_to_nearest_on_correlated_inputs(block, symmetric):
    k, n = 256, 48
    x = _correlated(2048, k, seed=block)
    w = np.random.default_rng(7).standard_normal((n, k)).astype(np.float32)
    rtn = quantize_blocks(w, block, symmetric=symmetric, search="rtn").decode()
    codes, _ = quantize_gptq(w, feedback(_gram(x)), block, symmetric=symmetric)
    # on held-out activations from the same distribution, not only on the calibration ones
    test = _correlated(1024, k, seed=block, sample=1)
    assert output_error(x, w, codes.decode()) < 0.8 * output_error(x, w, rtn)
    assert output_error(test, w, codes.decode()) < output_error(test, w, rtn)


@pytest.mark.fuzz
@PROPERTY
@given(st.integers(1, 6), st.integers(1, 150), st.sampled_from(BLOCK_SIZES), st.booleans(), st.integers(0, 10**6))
def test_codes_are_on_the_4_bit_grid_and_decode_as_stored(rows, k, block, symmetric, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, k)) * 10.0 ** rng.integers(-4, 4)).astype(np.float32)
    x = _correlated(64, k, seed)
    codes, kept = quantize_gptq(w, feedback(_gram(x)), block, symmetric=symmetric)
    assert codes.codes.dtype == np.uint8 and codes.codes.max() <= 15
    assert codes.zero_point.max() <= 15 and (codes.scale > 0).all()
    if symmetric:
        assert (codes.zero_point == 8).all()
    padding = codes.codes.reshape(rows, -1)[:, k:]
    zero = np.repeat(codes.zero_point, block, axis=1)[:, k:]
    assert (padding == zero).all()  # padding decodes to exactly 0
    decoded = codes.decode()
    grid = (codes.codes.astype(np.float32) - codes.zero_point[..., None]) * codes.scale[..., None]
    assert np.array_equal(decoded, grid.reshape(rows, -1)[:, :k])
    assert kept.size == 0


@pytest.mark.parametrize("block", BLOCK_SIZES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_a_diagonal_hessian_gives_exactly_round_to_nearest(block, symmetric):
    """Uncorrelated inputs: no error is passed on, so every column is rounded to nearest."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((40, 200)).astype(np.float32)
    h = np.diag(rng.uniform(0.1, 5.0, 200))
    codes, _ = quantize_gptq(w, feedback(h), block, symmetric=symmetric)
    rtn = quantize_blocks(w, block, symmetric=symmetric, search="rtn")
    assert np.array_equal(codes.codes, rtn.codes)
    assert np.array_equal(codes.zero_point, rtn.zero_point)
    np.testing.assert_array_equal(codes.scale, rtn.scale)


def test_feedback_is_strictly_upper_and_factorises_the_damped_hessian():
    """H + damp = (I + F) D (I + F).T with D diagonal: F is GPTQ's feedback in LDL form."""
    x = _correlated(500, 64, seed=1).astype(np.float64)
    h = x.T @ x
    f = feedback(h, damp=0.05)
    assert np.allclose(np.tril(f), 0.0)
    damped = h + 0.05 * np.mean(np.diag(h)) * np.eye(64)
    unit = np.eye(64) + f
    inner = np.linalg.solve(unit, damped) @ np.linalg.inv(unit).T
    assert np.allclose(inner, np.diag(np.diag(inner)), atol=1e-6 * np.abs(damped).max())


def test_feedback_of_dead_channels_passes_nothing():
    x = _correlated(300, 32, seed=2).astype(np.float64)
    x[:, 5] = 0.0  # never active in calibration
    f = feedback(x.T @ x)
    assert np.all(f[5, :] == 0.0) and np.all(f[:, 5] == 0.0)


@pytest.mark.fuzz
@PROPERTY
@given(st.integers(1, 200), st.integers(0, 10**6))
def test_panel_cholesky_equals_lapack(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n + 5, n))
    spd = a.T @ a + 1e-3 * np.eye(n)
    np.testing.assert_allclose(cholesky(spd), np.linalg.cholesky(spd), rtol=1e-8, atol=1e-8 * np.abs(spd).max())


def test_cholesky_refuses_a_matrix_that_is_not_positive_definite():
    with pytest.raises(np.linalg.LinAlgError):
        cholesky(-np.eye(100))


def test_exact_values_are_returned_updated_and_left_out_of_their_block_scale():
    k, n = 128, 16
    x = _correlated(1024, k, seed=4)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((n, k)).astype(np.float32)
    w[3, 40] = 60.0  # would stretch its block's scale 20x
    exact = np.zeros(w.shape, dtype=bool)
    exact[3, 40] = True
    f = feedback(_gram(x))
    codes, kept = quantize_gptq(w, f, 32, exact=exact)
    assert kept.shape == (1,) and abs(kept[0] - 60.0) < 1.0  # the error fed onto it is small
    assert codes.scale[3, 1] < 1.0  # its block's scale ignores it
    decoded = codes.decode()
    decoded[3, 40] = kept[0]
    plain, _ = quantize_gptq(w, f, 32)
    row = slice(3, 4)  # the outlier's output channel
    assert output_error(x, w[row], decoded[row]) < 0.5 * output_error(x, w[row], plain.decode()[row])


def test_same_inputs_give_the_same_codes_and_float16_scales_stay_on_their_grid():
    x = _correlated(512, 96, seed=6)
    w = np.random.default_rng(8).standard_normal((24, 96)).astype(np.float32)
    blocks = w.reshape(24, -1, 32)
    unit = 8.0
    scale_of = scale_rounder(blocks, False, np.float16, unit)
    a, _ = quantize_gptq(w, feedback(_gram(x)), 32, scale_of=scale_of)
    b, _ = quantize_gptq(w, feedback(_gram(x)), 32, scale_of=scale_of)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scale, b.scale)
    rel = a.scale / unit
    assert np.array_equal(rel.astype(np.float16).astype(np.float32), rel)


def test_single_blas_thread_restores_the_setting_and_nests():
    from shrinkray.methods.gptq import _openblas

    funcs = _openblas()
    if funcs is None:
        pytest.skip("numpy does not use OpenBLAS here")
    get, _ = funcs
    before = int(get())
    with single_blas_thread():
        assert int(get()) == 1
        with single_blas_thread():
            assert int(get()) == 1
        assert int(get()) == 1
    assert int(get()) == before


def test_calibrate_keeps_second_moments_within_its_memory_cap_smallest_first():
    from types import SimpleNamespace

    from onnx import TensorProto, helper, numpy_helper

    from shrinkray.graph.weights import find_weights
    from shrinkray.methods.activations import calibrate
    from shrinkray.methods.base import RunContext

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 128)).astype(np.float32)
    w2 = rng.standard_normal((128, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])], "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    samples = [{"x": _correlated(50, 64, seed=1, sample=k)} for k in range(3)]
    refs = find_weights(model)
    context = RunContext(calibration=SimpleNamespace(samples=samples, user_data=False))
    cal = calibrate(model, refs, context, gram=True, max_gram_bytes=64 * 64 * 4 + 100)
    assert set(cal.power) == {"w1", "w2"} and set(cal.gram) == {"w1"}  # 128 x 128 did not fit
    assert "1 activation" in cal.note and cal.tokens == 150
    x = np.concatenate([s["x"] for s in samples]).astype(np.float64)
    np.testing.assert_allclose(cal.gram["w1"], x.T @ x / len(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cal.power["w1"], np.mean(x**2, axis=0), rtol=1e-5)
    everything = calibrate(model, refs, context, gram=True)
    assert set(everything.gram) == {"w1", "w2"} and not everything.note
    assert not calibrate(model, refs, context).gram  # second moments only when asked
