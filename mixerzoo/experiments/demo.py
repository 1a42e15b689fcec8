"""The quick demo: why CAT solves MQAR in one layer (paper 000 Fig. 2 right, Thm. 1).

Trains 1-layer CAT, 1-layer attention, 2-layer attention and 2-layer BaseConv on CAT-style
MQAR (vocab 8192, d_model 64, L=64, 16 key-value pairs) with one shared data set and a
CPU budget of a few minutes, records every run in the results store, prints a table and
draws a bar chart. One attention layer cannot form an induction head (it needs a previous-
token head feeding a matching head), whereas CAT's key convolution puts the previous
token into each key, so a single layer suffices. With this budget (at most two epochs of
20,000 examples) 2-layer attention and BaseConv have not yet formed that circuit either;
they need far longer training (``mixerzoo run cat-mqar --preset paper``: 64 epochs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mixerzoo.config import RunConfig
from mixerzoo.experiments.results_store import ResultsStore
from mixerzoo.experiments.runs import execute_run
from mixerzoo.params import validate

TASK = {"name": "mqar_cat", "vocab_size": 8192, "seq_len": 64, "num_kv_pairs": 16}
DATA = {"task": TASK, "n_train": 20_000, "n_test": 1_000, "seed": 0}
TRAIN = {"epochs": 2, "batch_size": 64, "lr": 3e-3, "early_stop_accuracy": 0.99, "device": "cpu"}

MODELS: list[tuple[str, int, Any]] = [
    ("cat-1L", 1, "cat"),
    ("attention-1L", 1, "attention"),
    ("attention-2L", 2, "attention"),
    ("base_conv-2L", 2, [{"name": "base_conv", "filter": "short"}, {"name": "base_conv"}]),
]


@dataclass
class DemoRow:
    name: str
    layers: int
    mixer: str
    accuracy: float
    wall_s: float
    params: int


def demo_configs() -> list[RunConfig]:
    configs = []
    for name, layers, mixer in MODELS:
        raw = {"name": name, "data": DATA, "model": {"d_model": 64, "n_layers": layers, "mixer": mixer}}
        configs.append(validate(RunConfig, {**raw, "train": TRAIN}))
    return configs


def run_demo(store: ResultsStore, progress: bool = True, log=print) -> list[DemoRow]:
    configs = demo_configs()
    task = configs[0].data.build_task()
    data = (
        task.make(DATA["n_train"], DATA["seed"], "train"),
        task.make(DATA["n_test"], DATA["seed"], "test"),
    )
    rows = []
    for cfg in configs:
        log(f"training {cfg.label()} ...")
        rec = execute_run(cfg, store, experiment="demo", progress=progress, data=data)
        mixer = cfg.model.layer_mixers()[-1].name
        rows.append(
            DemoRow(
                name=cfg.label(),
                layers=cfg.model.n_layers,
                mixer=mixer,
                accuracy=float(rec.metrics["accuracy_per_query"]),
                wall_s=float(rec.wall_s or 0.0),
                params=int(rec.params or 0),
            )
        )
        log(f"  {cfg.label()}: accuracy {rows[-1].accuracy:.4f} in {rows[-1].wall_s:.1f} s")
    return rows


def format_table(rows: list[DemoRow]) -> str:
    lines = [f"{'model':<14} {'layers':>6} {'accuracy':>9} {'wall_s':>7} {'params':>9}"]
    for r in rows:
        lines.append(f"{r.name:<14} {r.layers:>6} {r.accuracy:>9.4f} {r.wall_s:>7.1f} {r.params:>9,}")
    return "\n".join(lines)


def plot_demo(rows: list[DemoRow], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    colors = [
        "#d62728" if r.mixer == "cat" else "#1f77b4" if r.mixer == "attention" else "#2ca02c" for r in rows
    ]
    bars = ax.bar([r.name for r in rows], [r.accuracy for r in rows], color=colors)
    for bar, r in zip(bars, rows):
        ax.text(bar.get_x() + bar.get_width() / 2, r.accuracy + 0.02, f"{r.accuracy:.3f}", ha="center")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("MQAR accuracy (per query)")
    ax.set_title("MQAR, V=8192, d=64, L=64, 16 kv pairs")
    ax.axhline(0.99, color="gray", lw=0.8, ls="--")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
