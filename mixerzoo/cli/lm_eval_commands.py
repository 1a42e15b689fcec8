"""``mixerzoo lm eval``: AR-hit slices and longer lengths of ``lm train`` runs.

    mixerzoo lm eval ar-slices runs/attn runs/conv --plot ar_gap.png     # Zoology Table 1, Figs. 1/3
    mixerzoo lm eval ar-slices runs/attn runs/conv --json > slices.json
    mixerzoo lm eval lengths runs/attn --factors 1,2,4,8,16 --scaling none,pi,yarn   # CAT Fig. 1 right

Each CKPT_DIR is a ``mixerzoo lm train --out`` folder; its corpus is loaded from the run
config (``--data-dir`` when its files have moved). ar-slices needs runs of one corpus; the first
run is the reference of the gaps (put attention first).
"""

from __future__ import annotations

from pathlib import Path

import click

from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import write_json
from mixerzoo.registry import ConfigError


@click.group(name="eval")
def lm_eval() -> None:
    """Evaluate language-model runs: AR-hit slices (Zoology) and length extrapolation (CAT)."""


def _load_runs(dirs, data_dir, cache_dir):
    from mixerzoo.evaluation.lm_runs import load_lm_run

    runs = [load_lm_run(d, data_dir=data_dir, cache_dir=cache_dir) for d in dirs]
    first = runs[0]
    for run in runs[1:]:
        same = (run.config["corpus"]["name"], run.config["corpus"].get("params")) == (
            first.config["corpus"]["name"],
            first.config["corpus"].get("params"),
        )
        if not same or run.corpus.vocab_size != first.corpus.vocab_size:
            raise ConfigError(
                f"{str(run.path)!r} was trained on corpus {run.config['corpus']['name']!r} and "
                f"{str(first.path)!r} on {first.config['corpus']['name']!r}: compare runs of one corpus"
            )
    names = [r.name for r in runs]
    if len(set(names)) != len(names):  # two folders of one name in different parents
        for i, r in enumerate(runs):
            r.name = f"{r.name}#{i + 1}"
    return runs


def _max_count(value: str) -> int | None:
    if value.strip().lower() == "none":
        return None
    try:
        count = int(value)
    except ValueError:
        raise ConfigError(f"--max-train-count {value!r}: expected an integer >= 0 or 'none'") from None
    if count < 0:
        raise ConfigError(f"--max-train-count {count}: expected an integer >= 0 or 'none'")
    return count


@lm_eval.command(name="ar-slices")
@click.argument("ckpt_dirs", nargs=-1, required=True)
@click.option("--data-dir", default=None, help="folder holding the corpus files (overrides the run config's)")
@click.option(
    "--cache-dir", default=None, type=OutputPath("dir"), help="token-array cache (overrides the run config's)"
)
@click.option("--split", default="val", show_default=True, help="split to label and score")
@click.option(
    "--block-size",
    type=click.IntRange(min=1),
    default=None,
    help="window length (default: train.block_size of the first run)",
)
@click.option("--windows", type=click.IntRange(min=1), default=200, show_default=True, help="windows scored")
@click.option(
    "--ngram",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="n of the repeated n-gram (Zoology: bigrams)",
)
@click.option(
    "--max-train-count",
    default="1250",
    show_default=True,
    help="AR hits: n-grams seen at most this often in training (Zoology: 1,250); 'none': no filter",
)
@click.option("--no-unigram", is_flag=True, help="leave out the unigram reference")
@click.option("--json", "as_json", is_flag=True, help="print the slices as JSON")
@click.option(
    "--plot",
    "plot_path",
    default=None,
    type=OutputPath(),
    help="PNG of the gap between the first two runs by slice",
)
def ar_slices_cmd(
    ckpt_dirs,
    data_dir,
    cache_dir,
    split,
    block_size,
    windows,
    ngram,
    max_train_count,
    no_unigram,
    as_json,
    plot_path,
) -> None:
    """Loss per AR-hit slice (Zoology Sec. 3, App. C.1) of the LM runs in CKPT_DIRS."""
    from mixerzoo.evaluation.ar_hits import evaluate_ar_slices, plot_ar_slices

    limit = _max_count(max_train_count)
    runs = _load_runs(ckpt_dirs, data_dir, cache_dir)
    corpus = runs[0].corpus
    payload = evaluate_ar_slices(
        {r.name: r.model for r in runs},
        corpus,
        block_size or runs[0].train_len,
        max_windows=windows,
        split=split,
        n=ngram,
        max_train_count=limit,
        unigram=not no_unigram,
    )
    payload["runs"] = {r.name: {"path": str(r.path), "mixer": r.mixer, "step": r.step} for r in runs}
    figure = None
    if plot_path:
        if len(payload["models"]) < 2:
            raise ConfigError("--plot compares two models: give two run folders (or keep the unigram)")
        a, b = payload["models"][:2]
        figure = str(plot_ar_slices(payload["slices"], a, b, Path(plot_path), corpus.unit))
        payload["figure"] = figure
    if as_json:
        write_json("-", payload)
        return
    _print_slices(payload)
    if figure:
        click.echo(f"\nplot: {figure}")


def _print_slices(payload: dict) -> None:
    models, ref = payload["models"], payload["reference"]
    key = "bpc" if payload["unit"] in ("char", "byte") else "ppl"
    limit = payload["max_train_count"]
    rule = f"<= {limit} times in training" if limit is not None else "any training count"
    click.echo(
        f"{payload['split']} split: {payload['windows']} windows of {payload['block_size']} targets "
        f"({payload['tokens']:,} tokens); AR hit = {payload['ngram']}-gram repeated in context, {rule}"
    )
    others = [m for m in models if m != ref]
    head = f"{'slice':<44} {'tokens':>8} {'%':>6} " + " ".join(f"{m[:12]:>12}" for m in models)
    head += "".join(f" {'gap ' + m[:10]:>14}" for m in others)
    click.echo(f"\n{key} per slice (gap: model - {ref})")
    click.echo(head)
    for row in payload["slices"]:
        vals = [row["models"][m][key] for m in models]
        cells = " ".join(f"{v:>12.4f}" if v is not None else f"{'-':>12}" for v in vals)
        base = row["models"][ref][key]
        gaps = ""
        for m in others:
            v = row["models"][m][key]
            gaps += f" {v - base:>+14.4f}" if v is not None and base is not None else f" {'-':>14}"
        click.echo(
            f"{row['slice'][:44]:<44} {row['n_tokens']:>8} {100 * row['fraction']:>6.2f} {cells}{gaps}"
        )
    click.echo(f"\nshare of the loss gap to {ref} due to AR hits (Zoology App. C.1):")
    for m, frac in payload["ar_gap_fraction"].items():
        click.echo(f"  {m}: {'-' if frac is None else f'{100 * frac:.1f}%'}")


@lm_eval.command(name="lengths")
@click.argument("ckpt_dir")
@click.option(
    "--factors", default="1,2,4,8,16", show_default=True, help="test lengths as multiples of train.block_size"
)
@click.option(
    "--scaling", default="none", show_default=True, help="RoPE scaling: none, pi, yarn, or a comma list"
)
@click.option("--split", default="val", show_default=True, help="split to score")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=1 << 16,
    show_default=True,
    help="tokens scored per length",
)
@click.option("--data-dir", default=None, help="folder holding the corpus files (overrides the run config's)")
@click.option(
    "--cache-dir", default=None, type=OutputPath("dir"), help="token-array cache (overrides the run config's)"
)
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON")
def lengths_cmd(ckpt_dir, factors, scaling, split, max_tokens, data_dir, cache_dir, as_json) -> None:
    """Loss of the LM run CKPT_DIR at multiples of its training length (CAT Fig. 1 right)."""
    from mixerzoo.evaluation.ar_hits import loss_metrics
    from mixerzoo.evaluation.lm_lengths import SCALINGS, evaluate_lengths

    try:
        mults = [int(f) for f in factors.split(",") if f.strip()]
    except ValueError:
        raise ConfigError(f"--factors {factors!r}: expected a comma-separated list of integers") from None
    scalings = [s.strip() for s in scaling.split(",") if s.strip()]
    for s in scalings:
        if s not in SCALINGS:
            raise ConfigError(f"--scaling {s!r}: allowed {', '.join(SCALINGS)}")
    run = _load_runs([ckpt_dir], data_dir, cache_dir)[0]
    if split not in run.corpus.splits:
        raise ConfigError(f"--split {split!r}: corpus {run.corpus.name!r} has {', '.join(run.corpus.splits)}")
    rows = []
    for s in scalings:
        rows += evaluate_lengths(
            run.model, run.corpus.splits[split], run.train_len, mults, s, run.unit, max_tokens=max_tokens
        )
    payload = {
        "run": str(run.path),
        "mixer": run.mixer,
        "train_len": run.train_len,
        "split": split,
        "rows": rows,
    }
    payload["position"] = run.model.position
    if as_json:
        write_json("-", payload)
        return
    key = "bpc" if run.unit in ("char", "byte") else "ppl"
    click.echo(f"{run.name} ({run.mixer}, positions: {run.model.position}), trained at {run.train_len}")
    click.echo(
        f"{'scaling':<8} {'factor':>6} {'length':>7} {'tokens':>8} {key:>9} {key + ' beyond L':>13}  note"
    )
    for r in rows:
        value = f"{r[key]:>9.4f}" if r[key] is not None else f"{'-':>9}"
        beyond = "-"
        if r["loss_beyond"] is not None:
            beyond = f"{loss_metrics(r['loss_beyond'], run.unit)[key]:.4f}"
        where = f"{r['scaling']:<8} {r['factor']:>6} {r['length']:>7} {r['tokens']:>8}"
        click.echo(f"{where} {value} {beyond:>13}  {r['note']}")
