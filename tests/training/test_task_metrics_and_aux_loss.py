import torch

from mixerzoo.config import load_run_config
from mixerzoo.training import train


def test_regbench_run_reports_eq8_eq9_metrics():
    cfg = load_run_config(
        {
            "data": {
                "task": {"name": "regbench", "preset": "reference", "seq_len": 128},
                "n_train": 32,
                "n_test": 8,
            },
            "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
            "train": {"epochs": 1, "batch_size": 16},
        }
    )
    r = train(cfg, progress=False)
    assert 0 <= r.metrics["regbench_accuracy"] <= 1 and 0 <= r.metrics["regbench_tvd"] <= 1


def test_sparse_attention_aux_loss_enters_training(monkeypatch):
    import importlib

    train_mod = importlib.import_module("mixerzoo.training.train")
    seen = []
    real = train_mod.auxiliary_loss

    def spy(modules):
        out = real(modules)
        seen.append(out)
        return out

    monkeypatch.setattr(train_mod, "auxiliary_loss", spy)
    cfg = load_run_config(
        {
            "data": {
                "task": {"name": "mqar", "vocab_size": 32, "seq_len": 16, "num_kv_pairs": 2},
                "n_train": 32,
                "n_test": 8,
            },
            "model": {
                "d_model": 16,
                "n_layers": 1,
                "mixer": {"name": "sparse_attention", "selection": "learned"},
            },
            "train": {"epochs": 1, "batch_size": 16},
        }
    )
    train(cfg, progress=False)
    assert seen and all(isinstance(a, torch.Tensor) and a.ndim == 0 for a in seen)
