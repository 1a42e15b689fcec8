"""Figures and HTML reports from a tiny sweep (issue 5)."""

import xml.etree.ElementTree as ET

import pytest

from mixerzoo.cli.main import main
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.cells import collect_results, results_rows, series
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.plots import plot_experiment
from mixerzoo.studies.sweep.report import write_report
from mixerzoo.studies.sweep.runner import run_sweep

SPEC = {
    "kind": "sweep",
    "name": "tiny-plot",
    "paper": "test Fig. 0",
    "claim": "paper: every model solves it",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
        "model": {"d_model": 8},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "variants": {
        "cat-1L": {"model": {"n_layers": 1, "mixer": "cat"}},
        "attention-1L": {"model": {"n_layers": 1, "mixer": "attention"}},
    },
    "grid": {"model.d_model": [8, 16], "data.task.seq_len": [8, 12], "train.lr": [1e-2, 3e-3]},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr"]},
    "presets": {
        "quick": {"variants": ["cat-1L"], "grid": {"model.d_model": [8], "train.lr": [1e-2]}},
        "paper": {},
    },
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    exp = load_experiment(SPEC)
    store = ResultsStore(tmp_path_factory.mktemp("plots") / "r")
    run_sweep(exp, store, progress=False, log=lambda s: None)
    return exp, store


def test_cells_hold_the_run_best_on_validation_over_learning_rates(swept):
    exp, store = swept
    res = collect_results(exp, store)
    assert res.n_finished == res.n_runs == 16 and len(res.cells) == 8
    for c in res.cells:
        best = max(c.records, key=lambda r: r.metrics["valid_accuracy_per_query"])
        assert c.selected == [best] and c.selected_on == "validation"
        assert c.metrics["accuracy_per_query"] == best.metrics["accuracy_per_query"]
    pts = series(res)
    assert set(pts) == {(None, d, v) for d in (8, 16) for v in ("cat-1L", "attention-1L")}
    assert all([x for x, _ in p] == [8, 12] for p in pts.values())
    header, rows = results_rows(res)
    assert header[:3] == ["variant", "d_model", "seq_len"] and len(rows) == 8


def test_plot_writes_png_and_svg_with_one_panel_per_d_model(swept, tmp_path):
    exp, store = swept
    png, svg = plot_experiment(collect_results(exp, store), tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    ET.fromstring(text[text.find("<svg") :])  # well-formed
    for label in ("model dimension = 8", "model dimension = 16", "cat-1L", "attention-1L", "sequence length"):
        assert label in text


def test_report_is_self_contained_html(swept, tmp_path):
    exp, store = swept
    out = write_report(
        collect_results(exp, store), tmp_path / "rep.html", preset="paper", experiment_yaml="name: x"
    )
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "data:image/png;base64," in page
    assert "paper: every model solves it" in page and "cat-1L" in page and "<table>" in page
    assert 'src="http' not in page and "<script" not in page
    assert page.count("<details><summary>config</summary>") == 16


def test_length_generalization_figure_uses_accuracy_at_test_lengths(tmp_path):
    spec = {
        **SPEC,
        "name": "tiny-lengen",
        "variants": {"cat-1L": SPEC["variants"]["cat-1L"]},
        "grid": {"train.lr": [1e-2]},
        "test": {"seq_lens": [8, 16, 32]},
        "figure": {"x": "test_seq_len", "train_length": 8},
    }
    exp = load_experiment(spec)
    store = ResultsStore(tmp_path / "r")
    run_sweep(exp, store, progress=False, log=lambda s: None)
    res = collect_results(exp, store)
    assert res.test_lengths() == [8, 16, 32]
    ((key, pts),) = series(res).items()
    rec = res.cells[0].records[0]
    assert pts == [(n, rec.metrics[f"accuracy@{n}"]) for n in (8, 16, 32)]
    assert all(p.is_file() for p in plot_experiment(res, tmp_path / "fig"))


def test_plot_without_runs_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no finished runs of tiny-plot"):
        plot_experiment(collect_results(load_experiment(SPEC), ResultsStore(tmp_path / "empty")), tmp_path)


def test_cli_run_plot_report(tmp_path, capsys):
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    results = str(tmp_path / "r")
    main(["study", "run", str(path), "--results", results, "--quiet"])
    out = capsys.readouterr().out
    assert "tiny-plot (quick): 2 runs" in out and "2 finished now" in out
    main(["study", "run", str(path), "--results", results, "--dry-run"])
    assert "2 finished, 0 to run" in capsys.readouterr().out
    main(["study", "plot", str(path), "--results", results, "--out", str(tmp_path / "figs")])
    assert (tmp_path / "figs" / "tiny-plot.png").is_file() and (tmp_path / "figs" / "tiny-plot.svg").is_file()
    main(["study", "report", str(path), "--results", results, "--out", str(tmp_path / "rep.html")])
    out = capsys.readouterr().out
    assert "paper: every model solves it" in out and (tmp_path / "rep.html").is_file()
    main(["study", "list", "--json"])
    assert '"cat-mqar"' in capsys.readouterr().out


def test_cli_user_errors_exit_2_with_one_line(tmp_path, capsys):
    for argv in (
        ["study", "run", "no-such-experiment"],
        ["study", "run", "cat-mqar", "--address", "x:1"],
        ["study", "plot", str(tmp_path / "missing.yaml")],
    ):
        with pytest.raises(SystemExit) as err:
            main(argv + ["--results", str(tmp_path / "r")])
        assert err.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")


def test_per_metric_reduction_is_refused_every_metric_comes_from_the_selected_run(swept):
    """``aggregate.per_metric`` once took each metric's best over the runs (loss and accuracy from
    two runs); it is refused with a line saying why, and a cell's loss is its selected run's."""
    exp, store = swept
    spec = {**SPEC, "aggregate": {**SPEC["aggregate"], "per_metric": {"loss": "min"}}}
    with pytest.raises(ConfigError, match="per_metric is no longer read"):
        load_experiment(spec)
    for c in collect_results(exp, store).cells:
        (run,) = c.selected
        assert c.metrics["loss"] == run.metrics["loss"]
        assert c.metrics["accuracy_per_query"] == run.metrics["accuracy_per_query"]


def test_per_metric_reduction_rejects_an_unknown_reducer():
    spec = {**SPEC, "aggregate": {**SPEC["aggregate"], "per_metric": {"loss": "lowest"}}}
    with pytest.raises(ConfigError, match="per_metric"):
        load_experiment(spec)
