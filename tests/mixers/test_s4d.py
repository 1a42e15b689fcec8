import torch
import torch.nn.functional as F

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.ssm_kernel import discretize_zoh, vandermonde_kernel


def test_zoh_matches_matrix_exponential():
    """exp(dt [[A, 1], [0, 0]]) = [[dA, dB], [0, 1]] for each complex mode."""
    log_dt = torch.tensor([-2.0, -4.0], dtype=torch.float64)
    log_neg_real = torch.tensor([[0.3, -0.7]], dtype=torch.float64).expand(2, 2)
    imag = torch.tensor([[1.0, 5.0]], dtype=torch.float64).expand(2, 2)
    dt_a, d_b = discretize_zoh(log_dt, log_neg_real, imag)
    for c in range(2):
        for m in range(2):
            a = complex(-torch.exp(log_neg_real[c, m]).item(), imag[c, m].item())
            block = torch.tensor([[a, 1.0], [0.0, 0.0]], dtype=torch.complex128) * torch.exp(log_dt[c]).item()
            e = torch.linalg.matrix_exp(block)
            torch.testing.assert_close(torch.exp(dt_a[c, m]), e[0, 0])
            torch.testing.assert_close(d_b[c, m], e[0, 1])


def test_vandermonde_kernel_matches_powers():
    g = torch.Generator().manual_seed(0)
    dt_a = torch.complex(-torch.rand(3, 4, generator=g), torch.randn(3, 4, generator=g)).to(torch.complex128)
    cb = torch.randn(3, 4, generator=g, dtype=torch.complex128)
    for length in (1, 6, 7, 17):
        k = vandermonde_kernel(dt_a, cb, length)
        assert k.shape == (3, length)
        for ell in range(length):
            torch.testing.assert_close(k[:, ell], 2 * (cb * torch.exp(dt_a) ** ell).sum(-1).real)


def test_forward_matches_time_domain_recurrence():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("s4d")(4, d_state=6).double()
    x = torch.randn(2, 11, 4, dtype=torch.float64)
    dt_a, d_b = discretize_zoh(m.log_dt, m.log_neg_real, m.imag)
    c = torch.complex(m.C[..., 0], m.C[..., 1])
    h = torch.zeros(2, 4, 3, dtype=torch.complex128)
    ys = []
    for t in range(11):
        h = torch.exp(dt_a) * h + d_b * x[:, t, :, None]
        ys.append(2 * (c * h).sum(-1).real + m.D * x[:, t])
    expected = F.glu(m.output_linear(F.gelu(torch.stack(ys, 1))), dim=-1)
    torch.testing.assert_close(m(x), expected)


def test_s4d_lin_initialisation():
    m = SEQUENCE_MIXERS.get("s4d")(4, d_state=8)
    torch.testing.assert_close(-torch.exp(m.log_neg_real), torch.full((4, 4), -0.5))
    torch.testing.assert_close(m.imag[0], torch.pi * torch.arange(4.0))
    assert m.state_size() == 4 * 8
