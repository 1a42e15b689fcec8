"""The memory a task run needs at least, and the refusal, up front, of a run that cannot fit.

A run is checked before its data and weights are allocated: :func:`memory_lower_bound` counts the
parameters on the ``meta`` device, and :func:`check_fits` compares the bound with the memory of
the machine (the GPU's for the weights and activations of a CUDA run).
"""

from __future__ import annotations

import torch

from mixerzoo.config import RunConfig
from mixerzoo.model import build_model, count_parameters
from mixerzoo.registry import ConfigError
from mixerzoo.tasks.base import format_bytes, physical_memory_bytes


def memory_lower_bound(cfg: RunConfig, task) -> dict[str, int]:
    """Bytes a run needs at least, by part, computed without allocating any of it.

    ``data``: the train and test arrays (``Task.bytes_per_example``); ``weights``: fp32 weights,
    gradients and AdamW's two moments, 16 bytes per parameter (counted on a model built on the
    ``meta`` device); ``activations``: one batch's residual stream kept for backward at every
    layer, 4 * b * l * d * (n_layers + 1) bytes. Mixers need more (attention scores, scan states),
    so a run over this bound cannot fit; one under it may still not.
    """
    try:
        with torch.device("meta"):
            n_params = count_parameters(build_model(cfg.model))
    except (RuntimeError, TypeError, OverflowError) as err:  # a weight's size overflows 64 bits
        if "overflow" not in str(err).lower():
            raise
        raise ConfigError(
            "this run's model cannot be built: a weight is larger than a 64-bit size can count "
            f"({str(err).splitlines()[0][:160]}); lower model.d_model or the mixer's sizes"
        ) from None
    rows = min(cfg.train.batch_size, cfg.data.n_train)
    return {
        "data": (cfg.data.n_train + cfg.data.n_test) * task.bytes_per_example(),
        "weights": 16 * n_params,
        "activations": 4 * rows * task.seq_len * cfg.model.d_model * (cfg.model.n_layers + 1),
    }


def check_fits(cfg: RunConfig, task, device: torch.device) -> None:
    """Refuse up front (ConfigError) a run whose lower bound exceeds the memory of where it runs."""
    need = memory_lower_bound(cfg, task)
    host = physical_memory_bytes()
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in need.items())
    if device.type == "cuda":
        gpu = torch.cuda.get_device_properties(device).total_memory
        if need["weights"] + need["activations"] > gpu:
            raise ConfigError(f"this run needs at least {parts}; the GPU has {format_bytes(gpu)}")
        if host and need["data"] > host:
            raise ConfigError(f"this run needs at least {parts}; this machine has {format_bytes(host)}")
    elif host and sum(need.values()) > host:
        raise ConfigError(
            f"this run needs at least {format_bytes(sum(need.values()))} ({parts}); this machine has "
            f"{format_bytes(host)} of memory"
        )
