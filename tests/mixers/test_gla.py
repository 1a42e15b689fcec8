"""The GLA layer's decay gate (the kernel, ``ops/gla.py``, is tested in tests/ops)."""

import torch

from mixerzoo.mixers import SEQUENCE_MIXERS


def test_gate_is_low_rank_sigmoid_to_one_over_tau():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("gla")(8, num_heads=2).double()
    x = torch.randn(5, 8, dtype=torch.float64)
    _, _, _, log_alpha = m.project(x)
    alpha = torch.sigmoid(x @ m.gate_down.weight.T @ m.gate_up.weight.T + m.gate_up.bias) ** (1 / 16)
    torch.testing.assert_close(torch.exp(log_alpha).reshape(5, -1), alpha)
    assert m.gate_down.weight.shape == (16, 8)
