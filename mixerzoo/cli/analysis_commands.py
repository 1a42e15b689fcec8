"""``mixerzoo analyze``: what a trained checkpoint computes inside (ICLL Sec. 5, App. E).

    mixerzoo data regbench --n 2000 --split train --out rb_train.npz
    mixerzoo data regbench --n 500 --split test --out rb_test.npz
    mixerzoo analyze probe CKPT --train rb_train.npz --test rb_test.npz --target frequency --n 2,3
    mixerzoo analyze attention-map CKPT --data rb_test.npz --instance 0 --layer 5 --out fig3.png
    mixerzoo analyze attention-map RUN_ID --out maps.pdf          # on the run's own task data

``probe`` fits one probe per layer of the checkpoint's residual stream (layer 0 = embeddings)
and prints a layer x task table (Figs. 4 and 6); ``attention-map`` draws the weights of each
attention-like layer on one instance, the tokens on both axes (Fig. 3).
"""

from __future__ import annotations

import sys

import click

from mixerzoo.cli.common import RESULTS_HELP, text_echo
from mixerzoo.cli.paths import OutputPath
from mixerzoo.config import MAX_TRAIN_STEPS
from mixerzoo.outputs import write_json
from mixerzoo.registry import ConfigError

TARGETS = ("count", "frequency", "existence", "state")


@click.group()
def analyze() -> None:
    """Probe and visualize trained checkpoints (ICLL Sec. 5, App. E)."""


def _int_list(value: str, option: str, minimum: int = 1) -> list[int]:
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {value!r}: expected comma-separated integers, e.g. 2,3") from None
    if not out or min(out) < minimum:
        raise ConfigError(f"{option} {value!r}: expected comma-separated integers >= {minimum}")
    return out


def _checkpoint_model(checkpoint: str):
    from pathlib import Path

    from mixerzoo.runs.task import load_checkpoint

    if not Path(checkpoint).is_file():
        raise ConfigError(f"checkpoint {checkpoint!r} does not exist")
    model, cfg = load_checkpoint(checkpoint)
    if cfg.model.head != "lm":
        raise ConfigError(
            f"checkpoint {checkpoint!r} has a {cfg.model.head} head; analyze reads token models"
        )
    return model.eval(), cfg


def _regbench(path: str, what: str, vocab_size: int, limit: int | None):
    from mixerzoo.baselines.regbench_files import load_regbench
    from mixerzoo.tasks.base import TaskData

    data = load_regbench(path)
    if limit is not None and limit < len(data):
        data = TaskData(
            data.inputs[:limit], data.labels[:limit], {k: v[:limit] for k, v in data.extras.items()}
        )
    hi = int(data.inputs.max())
    if hi >= vocab_size:
        raise ConfigError(
            f"{what} {path!r} holds token {hi}; the checkpoint's vocabulary is [0, {vocab_size})"
        )
    return data


@analyze.command(name="probe")
@click.argument("checkpoint")
@click.option("--train", "train_path", required=True, help="RegBench .npz the probes are fitted on")
@click.option("--test", "test_path", required=True, help="RegBench .npz the probes are scored on")
@click.option(
    "--target",
    "targets",
    multiple=True,
    type=click.Choice(TARGETS),
    default=("frequency",),
    show_default=True,
    help="probe target (repeatable): n-gram count / frequency / existence (App. E), or DFA-state equivalence",
)
@click.option("--n", "orders", default="2,3", show_default=True, help="n-gram orders of the n-gram targets")
@click.option("--probe", "kind", type=click.Choice(["linear", "mlp"]), default="linear", show_default=True)
@click.option("--layers", default=None, help="comma-separated layers (default: every layer, 0 = embeddings)")
@click.option(
    "--steps",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1, max=MAX_TRAIN_STEPS),
    help="MLP probe steps",
)
@click.option(
    "--samples", default=4000, show_default=True, type=click.IntRange(min=10), help="probe training samples"
)
@click.option(
    "--limit", default=None, type=click.IntRange(min=1), help="use the first N instances of each file"
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write the results as JSON (- for stdout)",
)
def probe_cmd(
    checkpoint, train_path, test_path, targets, orders, kind, layers, steps, samples, limit, seed, json_out
):
    """Fit probes on every layer of CHECKPOINT's hidden states (Figs. 4 and 6)."""
    from mixerzoo.analysis.probes import model_hidden_states, ngram_probe, state_probe

    ns = _int_list(orders, "--n")
    model, cfg = _checkpoint_model(checkpoint)
    train = _regbench(train_path, "--train", cfg.model.vocab_size, limit)
    test = _regbench(test_path, "--test", cfg.model.vocab_size, limit)
    h_train = model_hidden_states(model, train)
    h_test = model_hidden_states(model, test)
    chosen = list(range(len(h_train))) if layers is None else _int_list(layers, "--layers", minimum=0)
    bad = [k for k in chosen if k >= len(h_train)]
    if bad:
        raise ConfigError(f"--layers {layers!r}: this checkpoint has layers 0..{len(h_train) - 1}")
    tasks = [(t, n) for t in targets if t != "state" for n in ns] + [("state", None)] * ("state" in targets)
    results = []
    with click.progressbar(length=len(chosen) * len(tasks), label="probes", file=sys.stderr) as bar:
        for k in chosen:
            for target, n in tasks:
                if target == "state":
                    r = state_probe(
                        h_train[k], train, h_test[k], test, kind, samples, samples // 4, steps, seed, k
                    )
                else:
                    r = ngram_probe(
                        h_train[k],
                        train,
                        h_test[k],
                        test,
                        n,
                        target,
                        kind,
                        samples,
                        samples // 4,
                        steps,
                        seed,
                        k,
                    )
                results.append(r)
                bar.update(1)
    names = list(dict.fromkeys(r.task for r in results))
    echo = text_echo(json_out)
    echo("layer  " + "  ".join(f"{t:>16}" for t in names))
    for k in chosen:
        row = {r.task: r for r in results if r.layer == k}
        echo(f"{k:>5}  " + "  ".join(f"{row[t].value:>9.4f} {row[t].metric[:6]:>6}" for t in names))
    if json_out:
        write_json(
            json_out,
            {
                "checkpoint": checkpoint,
                "train": train_path,
                "test": test_path,
                "probe": kind,
                "results": [r.to_json() for r in results],
            },
        )


@analyze.command(name="attention-map")
@click.argument("checkpoint")
@click.option(
    "--data",
    "data_path",
    default=None,
    help="RegBench .npz (mixerzoo data regbench --out ...); default: a test instance of the run's own task",
)
@click.option("--results", default=None, help=RESULTS_HELP + "; where a run ID is looked up")
@click.option("--instance", default=0, show_default=True, type=click.IntRange(min=0))
@click.option(
    "--layer",
    default=None,
    type=click.IntRange(min=0),
    help="block index of an attention-like layer (default: each)",
)
@click.option("--last", default=40, show_default=True, type=click.IntRange(min=2), help="positions shown")
@click.option(
    "--out",
    required=True,
    type=OutputPath(),
    help="output image, .png, .pdf or .svg (one file per layer: NAME_layerK.png when several)",
)
def attention_map_cmd(checkpoint, data_path, results, instance, layer, last, out):
    """Draw the attention weights of CHECKPOINT (a checkpoint file or a run ID) on one instance.

    Every attention-like layer is drawn: attention, cat, mh_cat, landmark_cat, las_attention and
    sparse_attention, on a RegBench file (ICLL Fig. 3) or on the run's own task data.
    """
    from pathlib import Path

    from mixerzoo.analysis.model_internals import attention_maps, plot_attention_map
    from mixerzoo.runs.task import load_checkpoint
    from mixerzoo.store.lookup import checkpoint_path as _checkpoint_path

    path = _checkpoint_path(checkpoint, results)
    if not path.is_file():
        raise ConfigError(f"checkpoint {checkpoint!r} does not exist")
    model, cfg = load_checkpoint(path)
    ids, tokens = _attention_input(cfg, data_path, instance)
    maps = attention_maps(model.eval(), ids)  # a model without such layers: one ConfigError line
    if layer is not None and layer not in maps:
        raise ConfigError(
            f"--layer {layer}: attention layers of this checkpoint: {', '.join(map(str, sorted(maps)))}"
        )
    chosen = [layer] if layer is not None else sorted(maps)
    base = Path(out)
    for k in chosen:
        path = base if len(chosen) == 1 else base.with_name(f"{base.stem}_layer{k}{base.suffix or '.png'}")
        title = f"block {k} ({type(model.blocks[k].mixer).__name__})"
        plot_attention_map(maps[k][0], tokens, path, title=title, last=last)
        click.echo(f"wrote {path}")


def _attention_input(cfg, data_path: str | None, instance: int):
    """(one instance's input [1, l] or [1, l, c], a label per position) from a RegBench file or
    from the run's own task (its test split, generated with the run's data seed)."""
    import torch

    if data_path is not None:
        from mixerzoo.baselines.regbench_files import instance_string

        data = _regbench(data_path, "--data", cfg.model.vocab_size, None)
        if instance >= len(data):
            raise ConfigError(f"--instance {instance}: {data_path!r} holds {len(data)} instances")
        width = int((data.inputs[instance] != 0).sum())
        # one character per token ("|" separates strings)
        return torch.from_numpy(data.inputs[instance : instance + 1, :width]), list(
            instance_string(data, instance)
        )
    data = cfg.data.build_task().make(instance + 1, cfg.data.seed, "test")
    x = torch.from_numpy(data.inputs[instance : instance + 1])
    if x.dim() == 2:
        return x, [str(t) for t in x[0].tolist()]
    return x, [str(t) for t in range(x.shape[1])]


COMMANDS = [analyze]
