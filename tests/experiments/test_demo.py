import json

from mixerzoo.cli.main import main
from mixerzoo.runs import demo
from mixerzoo.runs.demo import DemoRow, summary


def test_demo_configs_match_the_issue_setting():
    configs = demo.demo_configs()
    assert [(c.label(), c.model.n_layers) for c in configs] == [
        ("cat-1L", 1),
        ("attention-1L", 1),
        ("attention-2L", 2),
    ]
    for c in configs:
        task = c.data.build_task()
        assert (task.vocab_size, task.seq_len, task.k) == (8192, 64, 16)
        assert c.model.d_model == 64 and c.model.vocab_size == 8192
    # one recipe and one budget for every model: 1-layer attention is judged at the budget the
    # 2-layer model gets, never at a shorter one
    assert len({(c.data.model_dump_json(), c.train.model_dump_json()) for c in configs}) == 1


def test_demo_command_writes_table_curves_plot_and_json(tmp_path, monkeypatch, capsys):
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
    monkeypatch.setattr(demo, "TRAIN", {**demo.TRAIN, "epochs": 3, "batch_size": 32})
    out = tmp_path / "demo.json"
    main(["demo", "--results", str(tmp_path / "r"), "--json", str(out), "--quiet"])  # returns on success
    payload = json.loads(out.read_text())
    assert [m["name"] for m in payload["models"]] == ["cat-1L", "attention-1L", "attention-2L"]
    for m in payload["models"]:
        assert set(m) >= {"name", "layers", "mixer", "accuracy", "steps", "steps_to_accuracy", "wall_s"}
        assert 0 <= m["accuracy"] <= 1 and m["params"] > 0
        # one curve point per epoch (2 steps each) until the run ended; the last is the final metric
        steps = [s for s, _ in m["curve"]]
        assert steps == list(range(2, m["steps"] + 1, 2)) and m["curve"][-1][1] == m["accuracy"]
        reached = [s for s, a in m["curve"] if a >= demo.THRESHOLD]
        assert m["steps_to_accuracy"] == (reached[0] if reached else None)
    assert (tmp_path / "r" / "demo.png").stat().st_size > 1000
    text = capsys.readouterr().out
    assert "cat-1L" in text and f"steps to {demo.THRESHOLD}" in text


def row(name, accuracy, steps, steps_to):
    return DemoRow(name, 1, "attention", accuracy, steps, steps_to, 1.0, 100)


def test_summary_calls_a_model_failing_only_at_a_budget_another_model_solved_it_in():
    rows = [
        row("cat-1L", 1.0, 200, 200),
        row("attention-1L", 0.02, 1600, None),
        row("attention-2L", 0.99, 1000, 1000),
    ]
    lines = summary(rows)
    assert lines[0] == "cat-1L: reached 0.99 after 200 steps."
    assert "at least the 1000 steps" in lines[1] and "under-trained" not in lines[1]
    # a budget shorter than the slowest success (or no success at all) is under-training, not failure
    short = summary([row("attention-1L", 0.02, 600, None), row("attention-2L", 0.99, 1000, 1000)])
    assert "under-trained" in short[0]
    assert "under-trained" in summary([row("attention-1L", 0.02, 600, None)])[0]
