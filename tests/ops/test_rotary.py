"""RoPE, position interpolation and YaRN against per-pair rotations written out here."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.ops.rotary import Rotary


def rotate_reference(x, freqs, positions, magnitude=1.0):
    """x: (l, e); rotate pair (2i, 2i+1) at position p by angle p * freqs[i]."""
    out = torch.empty_like(x)
    for t, p in enumerate(positions):
        for i, f in enumerate(freqs):
            c, s = math.cos(p * f), math.sin(p * f)
            a, b = x[t, 2 * i].item(), x[t, 2 * i + 1].item()
            out[t, 2 * i] = a * c - b * s
            out[t, 2 * i + 1] = a * s + b * c
    return out * magnitude


def plain_freqs(e, base=10000.0):
    return [base ** (-2 * i / e) for i in range(e // 2)]


def test_plain_rope_matches_pairwise_rotation():
    x = torch.randn(9, 8, dtype=torch.float64)
    got = Rotary(scaling="none").rotate(x)
    torch.testing.assert_close(got, rotate_reference(x, plain_freqs(8), range(9)))
    got = Rotary(base=100.0).rotate(x, offset=5)
    torch.testing.assert_close(got, rotate_reference(x, plain_freqs(8, 100.0), range(5, 14)))


def test_rope_scores_depend_only_on_relative_position():
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)
    rope = Rotary(scale=3.0)
    dots = [(rope.rotate(q, offset=i) * rope.rotate(k, offset=i - 4)).sum() for i in (4, 10, 100)]
    torch.testing.assert_close(dots[0], dots[1])
    torch.testing.assert_close(dots[0], dots[2])


def test_position_interpolation_divides_positions_by_scale():
    x = torch.randn(12, 6, dtype=torch.float64)
    got = Rotary(scale=4.0, scaling="pi").rotate(x)
    torch.testing.assert_close(got, rotate_reference(x, plain_freqs(6), [t / 4 for t in range(12)]))


def test_yarn_frequencies_follow_ntk_by_parts_ramp():
    e, L, s, alpha, beta = 32, 512, 4.0, 1.0, 32.0
    rope = Rotary(scale=s, scaling="yarn", original_len=L, yarn_alpha=alpha, yarn_beta=beta)
    got = rope.inv_freq(e)
    for i, theta in enumerate(plain_freqs(e)):
        wavelength = 2 * math.pi / theta
        r = L / wavelength
        if r < alpha:
            want = theta / s  # long wavelength: pure interpolation
        elif r > beta:
            want = theta  # many turns inside the training context: untouched
        else:
            gamma = (r - alpha) / (beta - alpha)
            want = (1 - gamma) * theta / s + gamma * theta
        assert got[i].item() == pytest.approx(want, rel=1e-12)
    # this setting exercises all three regimes
    turns = [L * th / (2 * math.pi) for th in plain_freqs(e)]
    assert min(turns) < alpha < beta < max(turns)
    assert any(alpha < r < beta for r in turns)


def test_yarn_rotation_and_temperature():
    e, L, s = 8, 16, 8.0
    rope = Rotary(scale=s, scaling="yarn", original_len=L)
    x = torch.randn(10, e, dtype=torch.float64)
    mag = 0.1 * math.log(s) + 1  # sqrt(1/t), applied to q and to k
    freqs = rope.inv_freq(e).tolist()
    torch.testing.assert_close(rope.rotate(x), rotate_reference(x, freqs, range(10), mag))
    q, k = torch.randn(2, 1, 1, 1, e, dtype=torch.float64).unbind(0)
    rq, rk = rope(q, k)
    plain = Rotary(base=rope.base)
    pq, pk = plain(q, k)  # at position 0 the rotation is the identity: only the temperature remains
    torch.testing.assert_close((rq * rk).sum(), (pq * pk).sum() * mag**2)


def test_yarn_with_scale_one_is_plain_rope():
    x = torch.randn(7, 8, dtype=torch.float64)
    torch.testing.assert_close(
        Rotary(scaling="yarn", original_len=32).rotate(x), Rotary(scaling="none").rotate(x)
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scaling": "ntk"},
        {"scaling": "none", "scale": 2.0},
        {"scaling": "yarn", "scale": 2.0},
        {"scaling": "yarn", "scale": 2.0, "original_len": 64, "yarn_alpha": 40.0},
        {"scale": 0.0},
    ],
)
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError):
        Rotary(**kwargs)


def test_dtype_is_preserved():
    x = torch.randn(1, 2, 5, 4, dtype=torch.float32)
    q, k = Rotary()(x, x)
    assert q.dtype == torch.float32 and k.shape == x.shape
