"""What a trained model computes inside: per-layer hidden states and attention maps (ICLL Sec. 5.1-5.2).

* :func:`hidden_states`: the residual stream before the first block (layer 0: embeddings and
  positions) and after every block (layers 1..N), ``[b, l, d]`` each -- what App. E's probes read;
* :func:`attention_maps`: the attention weights ``[b, h, l, l]`` of every attention-like layer
  (``attention``, ``cat``, ``mh_cat``, ``landmark_cat``, ``las_attention``, ``sparse_attention``),
  recomputed by the layer's own ``attention_map`` on its (normed) input;
* :func:`plot_attention_map`: one layer's heads on one instance with the tokens on both axes,
  the layout of Fig. 3 (which shows n-gram-matching heads attending to the token after an
  earlier occurrence of the current context).

Dimension names: ``b`` batch, ``l`` length, ``d`` width, ``h`` heads.
"""

from __future__ import annotations

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


#: the mixers whose weights :func:`attention_maps` draws (each has an ``attention_map`` method)
ATTENTION_MIXERS = ("attention", "cat", "mh_cat", "landmark_cat", "las_attention", "sparse_attention")


@torch.no_grad()
def attention_maps(model, input_ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """``{block index: [b, h, l, l]}`` attention weights of every attention-like mixer.

    Each mixer recomputes its weights from its own parameters on the input its forward pass sees
    (``attention_map``: softmax attention with its window and ALiBi, CAT's filtered queries and
    keys, MH-CAT's mixed maps, Landmark CAT's own and retrieved blocks, LaS's decayed and pooled
    rows, sparse attention's selected rows). A model with no such layer is a ConfigError.
    """
    maps: dict[int, torch.Tensor] = {}
    handles = []

    def grab(index: int, mixer):
        def hook(module, args, kwargs):
            maps[index] = mixer.attention_map(args[0], **kwargs).detach()

        return hook

    for i, block in enumerate(model.blocks):
        mixer = getattr(block, "mixer", None)
        if callable(getattr(mixer, "attention_map", None)):
            handles.append(mixer.register_forward_pre_hook(grab(i, mixer), with_kwargs=True))
    if not handles:
        raise ConfigError(
            f"attention map: the model has no attention-like layer (one of {', '.join(ATTENTION_MIXERS)})"
        )
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
