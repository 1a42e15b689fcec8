"""Figures for a paper: titles in words, PDF/SVG/PNG at a chosen dpi, the mean and band over seeds
beside the paper's aggregate, bars when the x axis has a single value."""

from __future__ import annotations

import statistics

import matplotlib
import pytest

matplotlib.use("Agg")

from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from mixerzoo.registry import ConfigError  # noqa: E402
from mixerzoo.store.results import ResultsStore  # noqa: E402
from mixerzoo.studies.sweep.cells import collect_results, series  # noqa: E402
from mixerzoo.studies.sweep.config import load_experiment  # noqa: E402
from mixerzoo.studies.sweep.plots import FigureStyle, draw_figure, plot_experiment, seed_spread  # noqa: E402
from mixerzoo.studies.sweep.runner import run_sweep  # noqa: E402

SPEC = {
    "kind": "sweep",
    "name": "tiny-seeds",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "grid": {"data.task.seq_len": [8, 12], "train.lr": [1e-2, 3e-3]},
    "seeds": [0, 1, 2],
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr", "seed"]},
    "figure": {"x": "data.task.seq_len", "panels": None},
    "presets": {"quick": {}, "paper": {}},
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    exp = load_experiment(SPEC)
    store = ResultsStore(tmp_path_factory.mktemp("style") / "r")
    run_sweep(exp, store, progress=False, log=lambda s: None)
    return exp, store


def _by_seed(res, seq_len):
    """{seed: max over learning rates} of one x value, read straight from the records."""
    out: dict[int, float] = {}
    for c in res.cells:
        if c.cell["data.task.seq_len"] != seq_len:
            continue
        for p, r in zip(c.planned, c.records):
            seed = p.config.train.seed
            out[seed] = max(out.get(seed, float("-inf")), r.metrics["accuracy_per_query"])
    return out


def test_seed_spread_is_mean_and_band_of_the_per_seed_aggregate(swept):
    exp, store = swept
    res = collect_results(exp, store)
    assert res.n_finished == 12
    ((key, pts),) = seed_spread(res, "minmax").items()
    ((_, std_pts),) = seed_spread(res, "std").items()
    for (x, mean, lo, hi, n), (_, _, slo, shi, _) in zip(pts, std_pts):
        per_seed = list(_by_seed(res, x).values())
        assert n == 3
        assert mean == pytest.approx(statistics.fmean(per_seed))
        assert (lo, hi) == (pytest.approx(min(per_seed)), pytest.approx(max(per_seed)))
        sd = statistics.pstdev(per_seed)
        assert (slo, shi) == (pytest.approx(mean - sd), pytest.approx(mean + sd))
    # the paper's aggregate: the test number of the one run best on validation over learning rates and seeds
    chosen = {
        c.cell["data.task.seq_len"]: max(c.records, key=lambda r: r.metrics["valid_accuracy_per_query"])
        for c in res.cells
    }
    assert [y for _, y in series(res)[key]] == [chosen[x].metrics["accuracy_per_query"] for x, *_ in pts]


def test_figure_draws_the_band_and_a_title_in_words(swept):
    import matplotlib.pyplot as plt

    exp, store = swept
    res = collect_results(exp, store)
    fig = draw_figure(res, series(res), seed_spread(res), FigureStyle(title="Recall vs length"), plt)
    (ax,) = fig.axes
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1 and (bands[0].get_gid() or "").startswith("seed-band")
    (mean_line,) = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("seed-mean")]
    assert list(mean_line.get_ydata()) == pytest.approx([t[1] for t in seed_spread(res)[(None, None, None)]])
    texts = [fig._suptitle.get_text(), *(t.get_text() for t in fig.texts)]
    assert texts[0] == "Recall vs length"
    assert "mean over 3 seeds" in " ".join(texts) and "learning rates" in " ".join(texts)
    assert not any("train.lr" in t or "max over" in t for t in texts)
    plt.close(fig)


def test_pdf_svg_png_and_no_title(swept, tmp_path):
    exp, store = swept
    res = collect_results(exp, store)
    (pdf,) = plot_experiment(res, tmp_path, style=FigureStyle(formats=("pdf",), show_title=False))
    assert pdf.suffix == ".pdf" and pdf.read_bytes()[:5] == b"%PDF-"
    png, svg = plot_experiment(res, tmp_path, stem="s", style=FigureStyle(formats=("png", "svg"), dpi=50))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "seed-band" in svg.read_text()
    with pytest.raises(ConfigError, match="--format"):
        FigureStyle(formats=("jpg",))


def test_single_x_value_is_drawn_as_bars(swept):
    import matplotlib.pyplot as plt

    exp, store = swept
    one = load_experiment({**SPEC, "grid": {"data.task.seq_len": [8], "train.lr": [1e-2, 3e-3]}})
    res = collect_results(one, store)  # the same runs, found by config hash
    fig = draw_figure(res, series(res), seed_spread(res), FigureStyle(), plt)
    (ax,) = fig.axes
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 1 and bars[0].get_height() == pytest.approx(series(res)[(None, None, None)][0][1])
    assert "sequence length = 8" in ax.get_xlabel()
    plt.close(fig)


def test_cli_plot_format_pdf(swept, tmp_path, run_cli):
    import yaml

    exp, store = swept
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    args = ["study", "plot", path, "--results", store.root, "--out", tmp_path / "f"]
    code, out, err = run_cli([*args, "--format", "pdf", "--no-title", "--band", "std", "--dpi", "300"])
    assert code == 0, err
    assert (tmp_path / "f" / "tiny-seeds.pdf").read_bytes()[:5] == b"%PDF-"
    assert not (tmp_path / "f" / "tiny-seeds.png").exists()
    code, _, err = run_cli([*args, "--format", "jpg"])
    assert code == 2 and "Traceback" not in err
