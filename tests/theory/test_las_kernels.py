"""LaS Fig. 1 kernels: each family's closed form against its own recurrence or construction, the
measures on planted kernels, and the claims on a run and on structureless cells."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mixerzoo.mixers.s4d import S4D
from mixerzoo.studies.computed.files import judge_theory, load_theory
from mixerzoo.theory.las_kernels import (
    KernelParams,
    kernel_measures,
    mega_kernels,
    mega_params,
    plan_cells,
    run,
    s4d_kernels,
    sgconv_kernels,
)


def test_the_mega_kernel_is_the_impulse_response_of_its_damped_ema():
    p, q, beta, eta = (t.numpy() for t in mega_params(3, 4, seed=5))
    k = mega_kernels(3, 40, 4, seed=5)
    h, response = np.zeros((3, 4)), []
    for t in range(40):  # h_t = p beta x_t + q h_{t-1}, y_t = eta . h_t, x = impulse at 0
        h = p * beta * (1.0 if t == 0 else 0.0) + q * h
        response.append((h * eta).sum(1))
    np.testing.assert_allclose(k, np.stack(response, 1), rtol=1e-12, atol=1e-15)


@torch.no_grad()
def test_the_s4d_kernel_is_the_impulse_response_of_the_s4d_recurrence():
    params = KernelParams(seq_len=64, channels=2, s4d_state=8)
    k = s4d_kernels(2, 64, params, seed=3)
    torch.manual_seed(3)
    dt_a, d_b, c = S4D(2, 64, d_state=8).double().discretized()
    h, response = torch.zeros_like(d_b), []
    for t in range(64):
        h = torch.exp(dt_a) * h + d_b * (1.0 if t == 0 else 0.0)
        response.append(2.0 * (c * h).sum(-1).real)
    np.testing.assert_allclose(k, torch.stack(response, 1).numpy(), atol=1e-12)


def test_sgconv_concatenates_upsampled_sub_kernels_of_halving_weight():
    k = sgconv_kernels(200, 256, dim=16, decay=0.5, seed=0)  # scales: 16, 16, 32, 64, 128 taps
    assert k.shape == (200, 256)
    np.testing.assert_allclose(np.linalg.norm(k, axis=1), 1.0)
    edges = [0, 16, 32, 64, 128, 256]
    rms = [np.sqrt((k[:, a:b] ** 2).mean()) for a, b in zip(edges, edges[1:])]
    ratios = np.array(rms[1:]) / np.array(rms[:-1])
    assert np.all(np.abs(ratios - 0.5) < 0.15), ratios  # linear upsampling shrinks RMS a little
    steps = [np.abs(np.diff(k[:, a:b])).mean() / np.abs(k[:, a:b]).mean() for a, b in zip(edges, edges[1:])]
    assert steps[4] < steps[2] < steps[0]  # the more a scale is upsampled, the smoother it is


def test_the_measures_on_planted_kernels():
    n = 1000
    r = 0.99
    decay = r ** np.arange(n)
    m = kernel_measures(decay[None], head_fraction=0.1, blocks=10)
    assert m["head_mass_share"][0] == pytest.approx((1 - r**100) / (1 - r**n))
    assert m["envelope_slope"][0] == pytest.approx(n * math.log(r), rel=1e-3)
    mean_step, mean_abs = (1 - r ** (n - 1)) / (n - 1), (1 - r**n) / ((1 - r) * n)  # telescoping sums
    assert m["roughness"][0] == pytest.approx(mean_step / mean_abs, rel=1e-9)
    noise = np.random.default_rng(0).standard_normal((400, n))
    m = kernel_measures(noise, 0.1, 10)
    assert m["head_mass_share"].mean() == pytest.approx(0.1, abs=0.005)
    assert abs(m["envelope_slope"].mean()) < 0.02
    assert m["roughness"].mean() == pytest.approx(math.sqrt(2), abs=0.01)


SMALL = {"seq_len": 256, "channels": 8, "seeds": [0, 1], "s4d_state": 16, "sgconv_kernel_dim": 32}


def test_a_small_run_makes_one_cell_per_family_with_errors_and_a_figure(tmp_path):
    p = KernelParams(**SMALL)
    out = run(p, log=lambda _m: None)
    assert [c["family"] for c in out.cells] == ["s4d", "mega", "sgconv", "noise"]
    assert plan_cells(p.model_dump()) == [{"family": c["family"]} for c in out.cells]
    for cell in out.cells:
        assert cell["n_test"] == 16 and cell["seeds"] == 2 and cell["se:roughness"] > 0
    assert out.plot is not None and out.plot(tmp_path)[0].is_file()


def test_the_claims_hold_on_a_run_and_fail_on_structureless_kernels():
    exp = load_theory("las-fig1-kernels")
    out = run(KernelParams(**SMALL), log=lambda _m: None)
    verdicts = judge_theory(exp, out.cells, out.metric, out.axes, "quick")
    assert {v["verdict"] for v in verdicts} == {"reproduced"}
    noise = next(c for c in out.cells if c["family"] == "noise")
    flat = [{**noise, "family": c["family"]} for c in out.cells]  # every family is white noise
    verdicts = judge_theory(exp, flat, out.metric, out.axes, "quick")
    assert not [v for v in verdicts if v["verdict"] == "reproduced"]
