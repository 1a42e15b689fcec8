"""``mixerzoo eval``: a checkpoint's metrics on given arrays, on its task's test split, or on its
corpus's validation split (a checkpoint file, an ``lm train --out`` folder, or a run ID).
"""

from __future__ import annotations

from pathlib import Path

import click

from mixerzoo.cli.common import RESULTS_HELP, text_echo
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import write_json
from mixerzoo.registry import ConfigError


@click.command(name="eval")
@click.argument("checkpoint")
@click.option(
    "--data",
    "data_path",
    default=None,
    help=".npz file with int64 arrays 'inputs' and 'labels' (a task run without it: the test split "
    "of its own task; a language model without it: its corpus's validation split)",
)
@click.option("--data-dir", default=None, help="language model: the folder of its corpus's files")
@click.option("--results", default=None, help=RESULTS_HELP + "; where a run ID is looked up")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write metrics as JSON (- for stdout)",
)
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1))
def eval_cmd(
    checkpoint: str,
    data_path: str | None,
    data_dir: str | None,
    results: str | None,
    json_out: str | None,
    batch_size: int,
) -> None:
    """Evaluate a mixerzoo CHECKPOINT: a checkpoint file, an `lm train --out` folder, or a run ID.

    With --data: accuracy and loss on the arrays' supervised positions (labels -100 are not
    scored). A task run without --data: its metrics on the test split its config generates (the
    data it was scored on when it trained). A language-model checkpoint without --data:
    next-token loss (and bits per character or perplexity) on the first 65,536 tokens of its
    corpus's validation split, in consecutive windows of its training context length.
    """
    from mixerzoo.checkpoint import load_checkpoint
    from mixerzoo.store.lookup import checkpoint_path

    ckpt = load_checkpoint(checkpoint_path(checkpoint, results))
    if data_path is not None:
        metrics = _eval_arrays(ckpt, data_path, batch_size)
    elif ckpt.kind == "lm":
        from mixerzoo.evaluation.lm_runs import lm_run_from_checkpoint, validation_metrics

        metrics = validation_metrics(lm_run_from_checkpoint(ckpt, data_dir=data_dir))
    else:
        metrics = _eval_test_split(ckpt, batch_size)
    line = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    text_echo(json_out)(line)
    if json_out:
        if "accuracy_per_query" in metrics:
            metrics = {"accuracy": metrics["accuracy_per_query"], **metrics}
        write_json(json_out, {**metrics, "checkpoint": str(ckpt.path), "kind": ckpt.kind, "data": data_path})


def _eval_test_split(ckpt, batch_size: int) -> dict:
    """A task run's metrics on the test split of its own config (its task, seed and n_test)."""
    import torch

    from mixerzoo.checkpoint import model_from_checkpoint, task_config
    from mixerzoo.evaluation.evaluate import evaluate

    cfg = task_config(ckpt)
    model = model_from_checkpoint(ckpt, cfg.model)
    task = cfg.data.build_task()
    test = task.make(cfg.data.n_test, cfg.data.seed, "test")
    mask = None if test.mask is None else torch.from_numpy(test.mask)
    inputs, labels = torch.from_numpy(test.inputs), torch.from_numpy(test.labels)
    return evaluate(model, task.output, inputs, labels, mask, batch_size)


def _eval_arrays(ckpt, data_path: str, batch_size: int) -> dict:
    """Accuracy and loss of a token model of either kind on an .npz of inputs and labels."""
    import numpy as np
    import torch

    from mixerzoo.checkpoint import load_model
    from mixerzoo.evaluation import check_token_arrays, evaluate_tokens

    model, cfg = load_model(ckpt)
    if cfg.head != "lm":
        raise ckpt.fail(
            f"it has a {cfg.head} head; `mixerzoo eval --data` scores token (language-model) heads on int64 "
            "inputs/labels arrays"
        )
    inputs, labels = _load_token_arrays(data_path)
    check_token_arrays(inputs, labels, cfg.vocab_size, max_len=cfg.max_len)
    inputs, labels = (torch.from_numpy(a.astype(np.int64)) for a in (inputs, labels))  # any integer dtype
    return evaluate_tokens(model, inputs, labels, batch_size)


def _load_token_arrays(data_path: str):
    """The int64 ``inputs`` and ``labels`` of an .npz file; anything else is one ConfigError line."""
    import numpy as np

    p = Path(data_path)
    if not p.is_file():
        raise ConfigError(f"data file {data_path!r} does not exist")
    try:
        arrays = np.load(p, allow_pickle=False)
        if not isinstance(arrays, np.lib.npyio.NpzFile):
            raise ValueError("it holds one array, not named arrays (write it with np.savez)")
        for key in ("inputs", "labels"):
            if key not in arrays.files:
                raise ConfigError(
                    f"data file {data_path!r} has no array {key!r} (has: {', '.join(arrays.files) or 'none'})"
                )
        inputs, labels = arrays["inputs"], arrays["labels"]
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - any unreadable file is a user error here
        raise ConfigError(f"data file {data_path!r} is not a readable .npz: {err}") from None
    return inputs, labels


COMMANDS = [eval_cmd]
