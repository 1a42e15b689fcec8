"""Issue 4 acceptance: every registered sequence mixer trains on MQAR through `mixerzoo train`."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from mixerzoo.cli.main import main
from mixerzoo.mixers import SEQUENCE_MIXERS


@pytest.mark.parametrize("name", SEQUENCE_MIXERS.names())
def test_mixer_trains_on_mqar_via_cli(name, tmp_path):
    cfg = {
        "name": f"smoke-{name}",
        "data": {
            "task": {"name": "mqar", "vocab_size": 32, "seq_len": 16, "num_kv_pairs": 2},
            "n_train": 64,
            "n_test": 16,
        },
        "model": {"d_model": 16, "n_layers": 2, "mixer": name},
        "train": {"epochs": 2, "batch_size": 16, "lr": 3e-3},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run.json"
    main(["train", str(path), "--results", str(tmp_path / "r"), "--quiet", "--json", str(out)])
    rec = json.loads(out.read_text())
    assert rec["status"] == "finished", rec["error"]
    assert math.isfinite(rec["metrics"]["loss"]) and 0 <= rec["metrics"]["accuracy_per_query"] <= 1
