import torch

from mixerzoo.mixers import SEQUENCE_MIXERS


def test_forward_follows_the_cell_equations():
    """ICLL Eq. 56-61 written out, with nn.LSTM's gate order (input, forget, cell, output)."""
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("lstm")(5).double()
    x = torch.randn(2, 8, 5, dtype=torch.float64)
    w_i, w_f, w_c, w_o = m.lstm.weight_ih_l0.chunk(4)
    u_i, u_f, u_c, u_o = m.lstm.weight_hh_l0.chunk(4)
    b_i, b_f, b_c, b_o = (m.lstm.bias_ih_l0 + m.lstm.bias_hh_l0).chunk(4)
    h = c = torch.zeros(2, 5, dtype=torch.float64)
    ys = []
    for t in range(8):
        xt = x[:, t]
        f = torch.sigmoid(xt @ w_f.T + h @ u_f.T + b_f)
        i = torch.sigmoid(xt @ w_i.T + h @ u_i.T + b_i)
        o = torch.sigmoid(xt @ w_o.T + h @ u_o.T + b_o)
        c = f * c + i * torch.tanh(xt @ w_c.T + h @ u_c.T + b_c)
        h = o * torch.tanh(c)
        ys.append(h)
    torch.testing.assert_close(m(x), torch.stack(ys, 1))
    assert m.state_size() == 10
