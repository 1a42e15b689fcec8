"""The ``mixerzoo results`` table: its columns, ``--filter``, ``--sort`` and the text layout.

    mixerzoo results --columns run_id,task,mixer,d_model,params,metric --sort -metric
    mixerzoo results --filter mixer=cat --filter model.d_model=64 --filter stale=yes

A column is one of :data:`COLUMNS` or the name of a metric the runs record (``accuracy_per_query``,
``regbench_tvd``, ``valid_accuracy``); a filter's or a sort's key is either, or a dotted path into
the run's config (``train.lr``, ``data.task.seq_len``). ``--filter run_id=HASH`` also takes a
config hash or its prefix, as ``study run --dry-run`` lists the planned runs. Text columns (the
run's name, its study) are wrapped onto further lines, never cut, so the runs of one sweep can be
told apart.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

from mixerzoo.registry import ConfigError, close_matches

DEFAULT_COLUMNS = (
    "run_id",
    "kind",
    "status",
    "tries",
    "task",
    "mixer",
    "d_model",
    "params",
    "name",
    "metric",
    "wall_s",
    "stale",
)
#: columns wrapped at this width (every other column is as wide as its widest value)
WRAPPED = {"name": 36, "study": 24, "mixer": 24}
NUMERIC = {"tries", "d_model", "n_layers", "params", "wall_s", "metric"}
#: what may name a metric before the runs are read: a word, with @ for a length (accuracy@128)
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_@-]*")


def _names(spec: Any) -> list[str]:
    """Mixer names of a config's ``model.mixer`` (a name, ``{name: ...}`` or one per layer)."""
    if isinstance(spec, str):
        return [spec]
    if isinstance(spec, dict) and "name" in spec:
        return [str(spec["name"])]
    if isinstance(spec, list):
        return list(dict.fromkeys(n for s in spec for n in _names(s)))
    return []


def config_value(config: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a config; None where the path does not exist."""
    node: Any = config
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, dict) and "name" in node and path.endswith(("task", "mixer", "state_mixer")):
        return node["name"]
    return node


def _metric(record) -> float | None:
    from mixerzoo.evaluation.evaluate import PRIMARY_METRIC

    for key in (*PRIMARY_METRIC.values(), "val_loss"):
        value = record.metrics.get(key)
        if isinstance(value, (int, float)):
            return float(value)
    return None


COLUMNS: dict[str, Callable[[Any], Any]] = {
    "run_id": lambda r: r.run_id,
    "kind": lambda r: r.kind,
    "study": lambda r: r.study,
    "status": lambda r: r.status,
    "tries": lambda r: len(r.attempts),
    "task": lambda r: config_value(r.config, "data.task"),
    "mixer": lambda r: "+".join(_names(config_value(r.config, "model.mixer") or [])) or None,
    "d_model": lambda r: config_value(r.config, "model.d_model"),
    "n_layers": lambda r: config_value(r.config, "model.n_layers"),
    "params": lambda r: r.params,
    "name": lambda r: r.name,
    "metric": _metric,
    "wall_s": lambda r: r.wall_s,
    "stale": lambda r: "yes" if r.stale else "",
    "overrides": lambda r: " ".join(f"{k}={v}" for k, v in r.overrides.items()) or None,
    "package_version": lambda r: r.package_version,
}


def parse_columns(text: str | None) -> list[str]:
    """``--columns a,b,c``: column or metric names, in the order given (a metric name is checked
    against the runs listed, by :func:`render`)."""
    if text is None:
        return list(DEFAULT_COLUMNS)
    names = [c.strip() for c in text.split(",") if c.strip()]
    for name in names:
        _check_column(name, "--columns")
    if not names:
        raise ConfigError(f"--columns {text!r}: name at least one of {', '.join(COLUMNS)}")
    return names


def _check_column(name: str, option: str, records: list | None = None) -> None:
    """A column, or a metric name: any word before the runs are read; with ``records``, a metric
    one of them records. Otherwise one ConfigError line with a guess."""
    if name in COLUMNS or "." in name:
        return
    if records is None and METRIC_NAME.fullmatch(name):
        return
    metrics = sorted({k for r in records or [] for k in (r.metrics or {})})
    if name in metrics:
        return
    guess = close_matches(name, [*COLUMNS, *metrics])
    hint = f" (did you mean {guess!r}?)" if guess else ""
    known = f"; metrics of these runs: {', '.join(metrics)}" if metrics else ""
    raise ConfigError(f"{option} {name!r}: unknown column{hint}; columns: {', '.join(COLUMNS)}{known}")


def is_metric_column(name: str) -> bool:
    return name not in COLUMNS and "." not in name


def value_of(record, key: str) -> Any:
    """A column's value, else the metric of that name, else (a dotted key) the run config's value."""
    if key in COLUMNS:
        return COLUMNS[key](record)
    metrics = record.metrics or {}
    return metrics[key] if key in metrics else config_value(record.config, key)


def _matches(value: Any, wanted: str) -> bool:
    if value is None:
        return wanted in ("", "-", "none", "null")
    if isinstance(value, bool):
        return str(value).lower() == wanted.lower()
    if isinstance(value, (int, float)):
        try:
            return float(value) == float(wanted)
        except ValueError:
            return False
    return str(value) == wanted


def parse_filters(items: tuple[str, ...]) -> list[tuple[str, str]]:
    """``--filter KEY=VALUE`` (repeatable): a column or a dotted config path, and the value."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--filter {item!r}: expected KEY=VALUE (a column or a dotted config path)")
        if "." not in key:
            _check_column(key, "--filter")
        out.append((key, value.strip()))
    return out


def _kept(record, key: str, wanted: str) -> bool:
    """Whether ``record`` passes ``--filter key=wanted``; ``run_id`` also takes a config hash prefix."""
    from mixerzoo.store.lookup import is_hash_prefix

    if key == "run_id" and is_hash_prefix(wanted) and record.config_hash.startswith(wanted.lower()):
        return True
    return _matches(value_of(record, key), wanted)


def select(records: list, filters: list[tuple[str, str]], sort: str | None) -> list:
    """The records every filter matches, sorted by ``sort`` (``-COLUMN``: descending; runs without
    a value last either way)."""
    for key, _ in filters:
        _check_column(key, "--filter", records or None)
    kept = [r for r in records if all(_kept(r, k, v) for k, v in filters)]
    if sort is None:
        return kept
    key = sort[1:] if sort.startswith("-") else sort
    _check_column(key, "--sort", records or None)
    present = [r for r in kept if value_of(r, key) not in (None, "")]
    missing = [r for r in kept if value_of(r, key) in (None, "")]

    def order(r):
        value = value_of(r, key)
        return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))

    return sorted(present, key=order, reverse=sort.startswith("-")) + missing


def run_metric_text(kind: str, metrics: dict[str, Any]) -> str:
    """A run's headline number: a task run's primary metric, a language model's validation loss,
    a computed result's reproduced claims (``"claims 3/4"``)."""
    if kind == "computed" and isinstance(metrics.get("claims"), int):
        return f"claims {metrics.get('reproduced', 0)}/{metrics['claims']}"
    if kind == "lm" and isinstance(metrics.get("val_loss"), (int, float)):
        return f"val_loss {metrics['val_loss']:.4f}"
    return primary_metric_text(metrics)


def primary_metric_text(metrics: dict[str, Any]) -> str:
    """The run's primary metric (its task kind's, ``evaluate.PRIMARY_METRIC``) as ``"acc/query
    0.9990"``, ``"accuracy 0.3600"`` or ``"r2 0.9954"``; ``"-"`` without one."""
    from mixerzoo.evaluation.evaluate import PRIMARY_METRIC

    for key in PRIMARY_METRIC.values():
        value = metrics.get(key)
        if isinstance(value, (int, float)):
            return f"{'acc/query' if key == 'accuracy_per_query' else key} {value:.4f}"
    return "-"


def _cell(record, column: str) -> str:
    if column == "metric":
        return run_metric_text(record.kind, record.metrics)
    value = value_of(record, column)
    if value is None:
        return "-"
    if column == "params" and isinstance(value, int):
        return f"{value:,}"
    if column == "wall_s" and isinstance(value, (int, float)):
        return f"{value:.1f}"
    if is_metric_column(column) and isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render(records: list, columns: list[str]) -> list[str]:
    """The table as lines: a header, then each run on one line or more (wrapped columns)."""
    for column in columns:
        _check_column(column, "--columns", records or None)
    cells = [[_wrap(_cell(r, c), c) for c in columns] for r in records]
    widths = [max([len(c)] + [len(line) for row in cells for line in row[i]]) for i, c in enumerate(columns)]
    lines = [_line(columns, widths, columns)]
    for row in cells:
        for n in range(max(len(parts) for parts in row)):
            lines.append(_line([parts[n] if n < len(parts) else "" for parts in row], widths, columns))
    return lines


def _wrap(text: str, column: str) -> list[str]:
    width = WRAPPED.get(column)
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [text]


def _line(values: list[str], widths: list[int], columns: list[str]) -> str:
    parts = [
        f"{v:>{w}}" if c in NUMERIC or is_metric_column(c) else f"{v:<{w}}"
        for v, w, c in zip(values, widths, columns, strict=True)
    ]
    return " ".join(parts).rstrip()
