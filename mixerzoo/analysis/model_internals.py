"""What a trained model computes inside: per-layer hidden states and attention maps (ICLL Sec. 5.1-5.2).

* :func:`hidden_states`: the residual stream before the first block (layer 0: embeddings and
  positions) and after every block (layers 1..N), ``[b, l, d]`` each -- what App. E's probes read;
* :func:`attention_maps`: the softmax attention weights ``[b, h, l, l]`` of every ``attention``
  layer, recomputed from the layer's own projections on its (normed) input;
* :func:`plot_attention_map`: one layer's heads on one instance with the tokens on both axes,
  the layout of Fig. 3 (which shows n-gram-matching heads attending to the token after an
  earlier occurrence of the current context).

Dimension names: ``b`` batch, ``l`` length, ``d`` width, ``h`` heads.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from mixerzoo.registry import ConfigError


def _forward_with_hooks(model, input_ids: torch.Tensor, handles: list) -> None:
    """One eval-mode forward pass that the hooks in ``handles`` observe; then the hooks go."""
    was_training = model.training
    model.eval()
    try:
        model.features(input_ids)
    finally:
        for hd in handles:
            hd.remove()
        model.train(was_training)


@torch.no_grad()
def hidden_states(model, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """``[layer 0, ..., layer N]`` residual streams ``[b, l, d]`` (see module docstring)."""
    blocks = list(model.blocks)
    out: list[torch.Tensor] = []
    handles = [blocks[0].register_forward_pre_hook(lambda m, args: out.append(args[0].detach()))]
    for block in blocks:
        handles.append(block.register_forward_hook(lambda m, args, y: out.append(y.detach())))
    _forward_with_hooks(model, input_ids, handles)
    return out


@torch.no_grad()
def attention_maps(model, input_ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """``{block index: [b, h, l, l]}`` attention weights of every ``attention`` mixer.

    Full causal pattern (with or without ALiBi, RoPE applied as in the layer); windowed patterns
    are refused with a ConfigError.
    """
    from mixerzoo.mixers.attention import Attention, alibi_bias
    from mixerzoo.ops.heads import split_heads

    maps: dict[int, torch.Tensor] = {}
    handles = []

    def grab(index: int, mixer: Attention):
        def hook(module, args, kwargs):
            x = args[0]
            h = mixer.p.num_heads
            q, k, _ = (split_heads(t, h) for t in mixer.qkv(x).chunk(3, dim=-1))
            rope = kwargs.get("rope")
            if rope is not None:
                q, k = rope(q, k)
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            l = x.shape[1]
            pos = torch.arange(l, device=x.device)
            if mixer.alibi_slopes is not None:
                scores = scores + alibi_bias(mixer.alibi_slopes.to(x.dtype), pos, pos)
            scores = scores.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
            maps[index] = torch.softmax(scores, dim=-1).detach()

        return hook

    for i, block in enumerate(model.blocks):
        mixer = getattr(block, "mixer", None)
        if isinstance(mixer, Attention):
            if mixer.p.pattern != "full":
                raise ConfigError(
                    f"attention map: layer {i} uses pattern {mixer.p.pattern!r}; only 'full' is drawn"
                )
            handles.append(mixer.register_forward_pre_hook(grab(i, mixer), with_kwargs=True))
    if not handles:
        raise ConfigError("attention map: the model has no 'attention' layer")
    _forward_with_hooks(model, input_ids, handles)
    return maps


def plot_attention_map(
    weights: torch.Tensor | np.ndarray,
    tokens: list[str],
    out: str | Path,
    title: str = "",
    last: int = 40,
) -> Path:
    """Heads ``[h, l, l]`` of one instance: the last ``last`` positions, query rows, key columns (Fig. 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = np.asarray(weights, dtype=np.float64)
    l = w.shape[-1]
    lo = max(0, l - last)
    w = w[:, lo:, lo:]
    labels = tokens[lo:l]
    h = w.shape[0]
    fig, axes = plt.subplots(
        1, h, figsize=(0.2 * len(labels) * h + 1.5, 0.2 * len(labels) + 1.5), squeeze=False
    )
    for j, ax in enumerate(axes[0]):
        ax.imshow(w[j], cmap="Blues", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(labels)), labels, fontsize=6)
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.set_title(f"{title} head {j}".strip(), fontsize=8)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
