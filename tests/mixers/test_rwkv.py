"""The RWKV-4 layer: token shift, receptance gate and WKV (``ops/wkv4.py``, tested in tests/ops)."""

import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.wkv4 import wkv4_recurrent


def test_module_token_shift_and_receptance_gate():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("rwkv")(6).double()
    x = torch.randn(2, 9, 6, dtype=torch.float64)
    prev = torch.cat([torch.zeros(2, 1, 6, dtype=torch.float64), x[:, :-1]], dim=1)
    k = m.key(m.mix_k * x + (1 - m.mix_k) * prev)
    v = m.value(m.mix_v * x + (1 - m.mix_v) * prev)
    r = m.receptance(m.mix_r * x + (1 - m.mix_r) * prev)
    expected = m.output(torch.sigmoid(r) * wkv4_recurrent(k, v, -torch.exp(m.time_decay), m.time_first)[0])
    torch.testing.assert_close(m(x), expected)
