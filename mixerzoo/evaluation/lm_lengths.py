"""Length extrapolation of a language model: train at L, evaluate at 2L .. 16L (CAT Fig. 1 right).

CAT (Sec. 6.2, Fig. 1 right) trains at one context length and reports perplexity at
longer test lengths for RoPE models, with YaRN "which incorporates position interpolation
(PI) ... and temperature scaling", and for CAT with no positional encoding at all. Here a
trained LM is scored on consecutive windows of ``factor x train_len`` tokens of a split with
the rotary embedding the scaling gives at that length (``LanguageModel.rope_for_length``:
``none`` keeps the trained one, ``pi`` / ``yarn`` rescale by length / train_len); the model
itself is never changed. A model without rotary positions (CAT, BaseConv, ``position: none``)
reads every length as it is: its rows say the scaling has no effect. Learned positions stop
at ``model.max_len``: longer lengths are reported as not evaluable, not as a number.

Each row: ``{"factor", "length", "scaling", "windows", "tokens", "loss", "loss_se", "bpc" | "ppl",
"loss_beyond", "note"}``; ``loss`` is the mean next-token loss (nats) over every position of
the windows, ``loss_se`` its standard error from the spread of the windows' mean losses
(``sd / sqrt(windows)``; None for one window: positions inside a window share its context and
are not independent samples), ``loss_beyond`` over the positions past the training length (>= train_len, the
part no training context covered; None at factor 1).
"""

from __future__ import annotations

import numpy as np
import torch

from mixerzoo.evaluation.ar_hits import contiguous_windows, loss_metrics, token_losses, window_error
from mixerzoo.registry import ConfigError

SCALINGS = ("none", "pi", "yarn")


def evaluate_lengths(
    model: torch.nn.Module,
    tokens: np.ndarray,
    train_len: int,
    factors: list[int] | tuple[int, ...] = (1, 2, 4, 8, 16),
    scaling: str = "none",
    unit: str = "char",
    max_tokens: int = 1 << 16,
    batch_tokens: int = 1 << 13,
) -> list[dict]:
    """Loss of ``model`` on ``tokens`` (a split) at each ``factor x train_len``; one row per factor.

    ``max_tokens`` bounds the tokens scored per length (at least one window); windows are
    batched ``batch_tokens // length`` at a time (at least one).
    """
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling = {scaling!r}: allowed {', '.join(SCALINGS)}")
    bad = [f for f in factors if not isinstance(f, int) or f < 1]
    if bad or not factors:
        raise ConfigError(f"factors = {list(factors)}: need positive integers (e.g. 1,2,4,8,16)")
    has_rope = getattr(model, "rope", None) is not None
    learned = getattr(model, "pos_embed", None) is not None
    rows = []
    for factor in factors:
        length = factor * train_len
        row: dict = {"factor": factor, "length": length, "scaling": scaling, "note": ""}
        if not has_rope and scaling != "none":
            row["note"] = "no rotary positions: the scaling has no effect"
        if learned and length > model.max_len:
            row.update({"windows": 0, "tokens": 0, "loss": None, "loss_se": None, "loss_beyond": None})
            row.update(loss_metrics(None, unit))
            row["note"] = f"learned positions end at max_len = {model.max_len}: not evaluable"
            rows.append(row)
            continue
        rope = model.rope_for_length(length, train_len, scaling) if has_rope else None
        try:
            windows = contiguous_windows(tokens, length, max(1, max_tokens // length))
            nll = token_losses(model, windows, max(1, batch_tokens // length), rope=rope)
        except ConfigError as err:  # a split shorter than one window; an explicit filter too short
            row.update({"windows": 0, "tokens": 0, "loss": None, "loss_se": None, "loss_beyond": None})
            row.update(loss_metrics(None, unit))
            row["note"] = f"not evaluable: {err}"
            rows.append(row)
            continue
        loss = float(nll.mean())
        se = window_error(nll.mean(axis=1))
        beyond = float(nll[:, train_len:].mean()) if length > train_len else None
        row.update({"windows": len(windows), "tokens": int(nll.size), "loss": loss, "loss_se": se})
        row["loss_beyond"] = beyond
        row.update(loss_metrics(loss, unit))
        rows.append(row)
    return rows
