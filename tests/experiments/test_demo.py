import json

from mixerzoo.cli.main import main
from mixerzoo.experiments import demo


def test_demo_configs_match_the_issue_setting():
    configs = demo.demo_configs()
    assert [(c.label(), c.model.n_layers) for c in configs] == [
        ("cat-1L", 1),
        ("attention-1L", 1),
        ("attention-2L", 2),
        ("base_conv-2L", 2),
    ]
    for c in configs:
        task = c.data.build_task()
        assert (task.vocab_size, task.seq_len, task.k) == (8192, 64, 16)
        assert c.model.d_model == 64 and c.model.vocab_size == 8192


def test_demo_command_writes_table_plot_and_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        demo,
        "DATA",
        {
            **demo.DATA,
            "task": {**demo.TASK, "vocab_size": 64, "seq_len": 16, "num_kv_pairs": 4},
            "n_train": 64,
            "n_test": 32,
        },
    )
    monkeypatch.setattr(demo, "TRAIN", {**demo.TRAIN, "epochs": 1})
    out = tmp_path / "demo.json"
    main(["demo", "--results", str(tmp_path / "r"), "--json", str(out), "--quiet"])  # returns on success
    payload = json.loads(out.read_text())
    assert [m["name"] for m in payload["models"]] == [
        "cat-1L",
        "attention-1L",
        "attention-2L",
        "base_conv-2L",
    ]
    for m in payload["models"]:
        assert set(m) >= {"name", "layers", "mixer", "accuracy", "wall_s", "params"}
        assert 0 <= m["accuracy"] <= 1 and m["params"] > 0
    assert (tmp_path / "r" / "demo.png").stat().st_size > 1000
    assert "cat-1L" in capsys.readouterr().out
