"""Issue 3: every registered task trains end to end through `mixerzoo train` and its loss decreases."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.cli.main import main
from mixerzoo.store.results import ResultsStore
from mixerzoo.tasks import TASKS

TINY = {
    "mqar": {"vocab_size": 32, "seq_len": 16, "num_kv_pairs": 2},
    "mqar_cat": {"vocab_size": 32, "seq_len": 16},
    "mqnar": {"vocab_size": 40, "seq_len": 24},
    "ar": {"vocab_size": 12, "seq_len": 24},
    "selective_copy": {"vocab_size": 8, "seq_len": 24, "num_tokens_to_copy": 4},
    "regbench": {"preset": "reference", "seq_len": 96},
    "cumsum": {"seq_len": 24},
    "cummax": {"seq_len": 24},
    "select": {"seq_len": 24, "num_selected": 4},
    "listops": {"seq_len": 40, "min_length": 8, "max_length": 40},
    "mad_in_context_recall": {"vocab_size": 12, "seq_len": 24},
    "mad_noisy_recall": {"vocab_size": 16, "noise_vocab_size": 4, "seq_len": 24},
    "mad_fuzzy_recall": {"vocab_size": 12, "seq_len": 24, "k_motif_size": 2, "v_motif_size": 2},
    "mad_selective_copy": {"vocab_size": 8, "seq_len": 24, "num_tokens_to_copy": 4},
    "mad_compression": {"vocab_size": 8, "seq_len": 12},
    "mad_memorization": {"vocab_size": 32, "seq_len": 16},
    "mqar_compositional": {"vocab_size": 48, "seq_len": 24},
    "mqar_forgetting": {"vocab_size": 32, "seq_len": 24, "num_kv_pairs": 3, "num_updates": 2},
    "mqar_multipass": {"vocab_size": 32, "seq_len": 24, "num_kv_pairs": 2},
    "parity": {"seq_len": 16},
    "majority": {"seq_len": 16},
    "pathfinder": {"resolution": 32, "difficulty": "easy"},
    "smnist": {},
    "pmnist": {},
    "scifar": {},
    "digits8x8": {},
    "lra_text": {"seq_len": 64},
    "lra_retrieval": {"doc_len": 32},
}


def test_every_registered_task_has_a_smoke_config():
    assert set(TINY) == set(TASKS.names())


#: image tasks read 784 to 1,024 tokens: 10-80 s each on a loaded 2-core machine
LONG = {"pathfinder", "smnist", "pmnist", "scifar"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in LONG else n for n in sorted(TINY)]
)
def test_task_trains_via_cli_and_loss_decreases(name, tmp_path, task_params):
    cfg = {
        "name": f"smoke-{name}",
        "data": {
            "task": {"name": name, **TINY[name], **task_params(name)},
            "n_train": 128,
            "n_test": 32,
        },
        "model": {"d_model": 32, "n_layers": 2, "mixer": "attention"},
        "train": {"epochs": 4, "batch_size": 32, "lr": 3e-3, "device": "cpu"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run.json"
    main(["train", str(path), "--results", str(tmp_path / "r"), "--quiet", "--json", str(out)])
    rec = json.loads(out.read_text())
    assert rec["status"] == "finished", rec["error"]
    history = ResultsStore(tmp_path / "r").history(rec["run_id"])
    assert len(history) == 4
    assert history[-1]["train_loss"] < history[0]["train_loss"]
