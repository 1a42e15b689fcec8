import math

import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.training import train
from mixerzoo.training.schedule import lr_factor
from mixerzoo.training.train import TIMING_KEYS


def tiny(mixer="cat", layers=1, **train_kw):
    return load_run_config(
        {
            "data": {
                "task": {"name": "mqar_cat", "vocab_size": 40, "seq_len": 16},
                "n_train": 512,
                "n_test": 128,
            },
            "model": {"d_model": 32, "n_layers": layers, "mixer": mixer},
            "train": {"epochs": 3, "batch_size": 32, "lr": 3e-3, **train_kw},
        }
    )


def test_trainer_learns_tiny_mqar():
    result = train(tiny(epochs=30, lr=1e-2), progress=False)
    first, last = result.history[0], result.history[-1]
    assert last["train_loss"] < first["train_loss"] * 0.5
    assert last["accuracy_per_query"] > 0.9  # chance is 1/40
    assert 0 <= last["accuracy_per_example"] <= last["accuracy_per_query"]


def test_training_is_deterministic_under_a_seed():
    a = train(tiny(), progress=False)
    b = train(tiny(), progress=False)
    drop_time = [{k: v for k, v in h.items() if k not in TIMING_KEYS} for h in a.history]
    assert drop_time == [{k: v for k, v in h.items() if k not in TIMING_KEYS} for h in b.history]
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)


def test_early_stop_and_max_steps():
    r = train(tiny(epochs=50, lr=1e-2, early_stop_accuracy=0.5), progress=False)
    assert r.metrics["epochs"] < 50 and r.metrics["valid_accuracy_per_query"] >= 0.5  # read on validation
    r = train(tiny(epochs=5, max_steps=7), progress=False)
    assert r.steps == 7


def test_grad_clip_and_schedules_run():
    for schedule in ("cosine", "linear", "constant"):
        r = train(tiny(epochs=1, schedule=schedule, grad_clip=1.0), progress=False)
        assert math.isfinite(r.metrics["loss"])


def test_lr_schedule_shape():
    total, warm = 100, 10
    f = [lr_factor(s, total, warm, "cosine") for s in range(total)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[-1] < 0.01 and all(a >= b for a, b in zip(f[10:], f[11:]))
    lin = [lr_factor(s, total, warm, "linear") for s in range(total)]
    assert lin[55] == pytest.approx(1 - 45 / 90)


def test_head_only_at_supervised_positions_gives_the_full_masked_loss():
    from mixerzoo.model import build_model
    from mixerzoo.training.train import supervised_loss

    cfg = tiny()
    model = build_model(cfg.model)
    d = cfg.data.build_task().make(8, 0)
    x, y = torch.from_numpy(d.inputs), torch.from_numpy(d.labels)
    full = torch.nn.functional.cross_entropy(model(x).reshape(-1, 40), y.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(supervised_loss(model, x, y), full)


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="train.lr"):
        load_run_config({"data": {"task": "mqar"}, "model": {"mixer": "cat"}, "train": {"lr": -1}})
    with pytest.raises(ConfigError, match="unknown task 'nope'"):
        load_run_config({"data": {"task": "nope"}, "model": {"mixer": "cat"}})
    with pytest.raises(ConfigError, match="unknown field 'train.epoch'"):
        load_run_config({"data": {"task": "mqar"}, "model": {"mixer": "cat"}, "train": {"epoch": 3}})


def test_model_defaults_come_from_the_task():
    cfg = load_run_config({"data": {"task": {"name": "mqar", "vocab_size": 100, "seq_len": 32}}, "model": {}})
    assert cfg.model.vocab_size == 100 and cfg.model.max_len == 32
    assert cfg.config_hash() == load_run_config(cfg.model_dump(mode="json")).config_hash()
    named = load_run_config({**cfg.model_dump(mode="json"), "name": "other"})
    assert named.config_hash() == cfg.config_hash()


def test_eval_every_steps_records_a_learning_curve_without_changing_training():
    # 512 examples / batch 32 = 16 steps per epoch; 3 epochs = 48 steps; every 5 steps + epoch ends
    plain = train(tiny(), progress=False)
    curve = train(tiny(eval_every_steps=5), progress=False)
    steps = [h["step"] for h in curve.history]
    assert steps == sorted({*range(5, 49, 5), 16, 32, 48})
    assert [h["epoch"] for h in curve.history if h["step"] in (15, 20)] == [1, 2]
    for p, q in zip(plain.model.parameters(), curve.model.parameters()):
        assert torch.equal(p, q)  # evaluating more often does not perturb the training trajectory
    assert curve.history[-1]["accuracy_per_query"] == plain.history[-1]["accuracy_per_query"]


def test_eval_every_steps_early_stop_stops_mid_epoch():
    result = train(tiny(epochs=40, lr=1e-2, eval_every_steps=4, early_stop_accuracy=0.5), progress=False)
    assert result.history[-1]["valid_accuracy_per_query"] >= 0.5  # the validation split stops a run
    assert result.steps == result.history[-1]["step"] and result.steps % 4 == 0
    assert result.steps % 16 != 0  # 16 steps per epoch: this seed reaches the target mid-epoch
    assert all(h["valid_accuracy_per_query"] < 0.5 for h in result.history[:-1])


def test_eval_every_steps_at_its_default_leaves_the_config_hash_as_before_the_field_existed():
    import hashlib
    import json

    cfg = tiny()
    dump = cfg.model_dump(mode="json", exclude={"name"})
    # the config as a store written before these fields existed holds it
    for section, field in [("train", "eval_every_steps"), ("model", "norm_position")]:
        del dump[section][field]
    for field in ("backbone", "compression_decoder", "norm_bias"):
        del dump["model"][field]
    for field in ("dtype", "compile"):
        del dump["train"][field]
    del dump["data"]["n_valid"]
    before = hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()
    assert cfg.config_hash() == before
    assert tiny(eval_every_steps=5).config_hash() != before  # set, it is part of the run's identity
