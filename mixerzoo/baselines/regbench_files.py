"""RegBench data files: ours (``.npz`` + automata sidecar) and the reference implementation's layout.

**Ours** (written by ``mixerzoo data regbench --out X.npz``): ``X.npz`` holds ``inputs``,
``labels`` and the extras of :mod:`mixerzoo.tasks.regbench` (``state``, ``transitions``,
``num_states``, ``num_strings``, ``length``); ``X.automata.json`` holds the token layout and each
instance's minimal DFA (:func:`mixerzoo.tasks.regbench.write_automata`).

**Reference** (berlino/seq_icl, the authors' code): instances are character strings, one symbol
per character and ``|`` between strings (``"abca|bca|a"``, ``src/dataloaders/dfa.py``
``generate_example``); its evaluation writes a tab-separated generations file without header,
columns ``input, target, pred, dfa, diff_n_gram, diff_dfa, diff_dfa_ngram`` (``probe.py``
``get_results``), and keeps each instance's ``DFA(num_nodes, alphabet, transitions)``
(``transitions[s]``: symbol -> next state, state 0 starts). We write the same seven columns
with the DFA as JSON ``{"num_nodes", "alphabet", "transitions"}`` and the model columns empty.
As in theirs, ``input`` is the model's input and stops one symbol short of the instance; ``target``
is the input shifted by one and holds the last symbol, so reading takes ``input`` plus the last
character of ``target`` (a file whose ``target`` is one shorter than ``input``, or empty, is read
as holding the whole instance in ``input``). We read the DFA column as that JSON or as the
dataclass's ``repr`` (``DFA(num_nodes=3, alphabet=('a', 'b'), transitions=({'a': 1}, ...), rng=...)``),
never by unpickling. Symbols are the letters ``a, b, ...`` = our tokens ``1, 2, ...``.

Reading re-minimizes each automaton (:func:`mixerzoo.tasks.regbench.minimal_dfa`) and replays the
strings through it to rebuild the per-position ``state``; a string the automaton rejects is an
error naming its line.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np

from mixerzoo.registry import ConfigError
from mixerzoo.tasks.base import TaskData
from mixerzoo.tasks.regbench import (
    PAD,
    minimal_dfa,
    next_token_labels,
    next_token_positions,
    symbol_name,
    write_automata,
)

SEPARATOR_CHAR = "|"
REFERENCE_COLUMNS = ("input", "target", "pred", "dfa", "diff_n_gram", "diff_dfa", "diff_dfa_ngram")
REQUIRED = ("inputs", "labels", "state", "transitions")


# -- ours ------------------------------------------------------------------------------
def load_regbench(path: str | Path) -> TaskData:
    """A RegBench ``.npz`` written by ``mixerzoo data regbench`` (or :func:`write_regbench`).

    ``ConfigError`` (one line) for a missing or unreadable file or missing arrays.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"data file {str(path)!r} does not exist")
    try:
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"data file {str(path)!r} is not a readable .npz: {err}") from None
    missing = [k for k in REQUIRED if k not in arrays]
    if missing:
        raise ConfigError(
            f"data file {str(path)!r} lacks {', '.join(missing)} (has: {', '.join(sorted(arrays))}); "
            "make one with `mixerzoo data regbench --out FILE.npz` or `mixerzoo import-regbench`"
        )
    inputs, labels = arrays.pop("inputs"), arrays.pop("labels")
    if inputs.ndim != 2 or inputs.shape != labels.shape or arrays["state"].shape != inputs.shape:
        raise ConfigError(f"data file {str(path)!r}: inputs, labels and state must share one [n, l] shape")
    t = arrays["transitions"]
    if t.ndim != 3 or t.shape[0] != inputs.shape[0] or inputs.max() > t.shape[2] + 1 or inputs.min() < 0:
        raise ConfigError(
            f"data file {str(path)!r}: transitions {t.shape} do not match inputs {inputs.shape} "
            "(token ids must lie in [0, num_symbols + 1])"
        )
    return TaskData(inputs.astype(np.int64), labels.astype(np.int64), arrays)


def write_regbench(data: TaskData, path: str | Path) -> Path:
    """Our layout: ``path`` (.npz) and ``path``'s ``.automata.json`` sidecar."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    np.savez(p, **data.arrays())
    write_automata(data, p.with_suffix(".automata.json"))
    return p


# -- reference layout ------------------------------------------------------------------
def instance_string(data: TaskData, i: int) -> str:
    """Instance ``i`` as the reference's character string (``"abca|bca|a"``)."""
    a = data.extras["transitions"].shape[2]
    if a > 26:
        raise ConfigError(f"num_symbols = {a}: the reference layout has one letter per symbol (at most 26)")
    chars = []
    for tok in data.inputs[i].tolist():
        if tok == PAD:
            break
        chars.append(SEPARATOR_CHAR if tok == a + 1 else symbol_name(tok - 1))
    return "".join(chars)


def reference_dfa(data: TaskData, i: int) -> dict:
    """Instance ``i``'s automaton as the reference ``DFA`` fields (JSON-ready)."""
    table = data.extras["transitions"][i]
    m = int(data.extras["num_states"][i]) if "num_states" in data.extras else table.shape[0]
    used = sorted({int(a) for a in np.flatnonzero((table[:m] >= 0).any(axis=0))})
    transitions = [
        {symbol_name(a): int(table[s, a]) for a in np.flatnonzero(table[s] >= 0).tolist()} for s in range(m)
    ]
    return {"num_nodes": m, "alphabet": [symbol_name(a) for a in used], "transitions": transitions}


def write_reference(data: TaskData, path: str | Path) -> Path:
    """Write ``data`` as the reference's tab-separated generations file (see the module docstring)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(len(data)):
        s = instance_string(data, i)
        dfa = json.dumps(reference_dfa(data, i), separators=(",", ":"))
        lines.append("\t".join([s[:-1], s[1:], "", dfa, "", "", ""]))
    p.write_text("\n".join(lines) + "\n")
    return p


def _parse_dfa(text: str, where: str) -> tuple[int, list[dict]]:
    text = text.strip()
    try:
        if text.startswith("{"):
            d = json.loads(text)
            return int(d["num_nodes"]), [dict(t) for t in d["transitions"]]
        # the dataclass repr: DFA(num_nodes=3, alphabet=(...), transitions=(...), rng=...)
        nodes = re.search(r"num_nodes=(\d+)", text)
        trans = re.search(r"transitions=(\(.*?\}\s*,?\s*\))", text)
        if not nodes or not trans:
            raise ValueError("no num_nodes= / transitions= fields")
        cleaned = re.sub(r"np\.\w+\((-?\d+)\)", r"\1", trans.group(1))  # np.int64(3) -> 3
        return int(nodes.group(1)), [dict(t) for t in ast.literal_eval(cleaned)]
    except (ValueError, KeyError, TypeError, SyntaxError, json.JSONDecodeError) as err:
        raise ConfigError(f"{where}: cannot read the dfa column ({err})") from None


def _instance_text(inp: str, target: str, where: str) -> str:
    """The whole instance from the ``input`` and ``target`` columns (see the module docstring)."""
    if not target or len(target) == len(inp) - 1:
        return inp
    if len(target) == len(inp) and target[:-1] == inp[1:]:
        return inp + target[-1]
    raise ConfigError(f"{where}: the target column is not the input shifted by one")


def read_reference(path: str | Path, num_symbols: int = 18, seq_len: int | None = None) -> TaskData:
    """Read the reference's generations TSV (or a file of bare ``input<TAB>...<TAB>dfa`` rows)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"reference file {str(path)!r} does not exist")
    rows = [r for r in p.read_text().splitlines() if r.strip()]
    if not rows:
        raise ConfigError(f"reference file {str(path)!r} is empty")
    letters = {symbol_name(j): j for j in range(num_symbols)}
    strings, tables = [], []
    for n, row in enumerate(rows, 1):
        where = f"{path}:{n}"
        cols = row.split("\t")
        if len(cols) < 4:
            raise ConfigError(
                f"{where}: expected >= 4 tab-separated columns ({', '.join(REFERENCE_COLUMNS)})"
            )
        m, trans = _parse_dfa(cols[3], where)
        text = _instance_text(cols[0], cols[1], where)
        dfa = minimal_dfa(_transition_table(m, trans, letters, num_symbols, where)).astype(np.int64)
        strings.append(_replay(text, dfa, letters, num_symbols + 1, where))
        tables.append(dfa)
    return _stack_reference(strings, tables, num_symbols, seq_len)


def _transition_table(
    m: int, trans: list[dict], letters: dict[str, int], num_symbols: int, where: str
) -> np.ndarray:
    """``[m, num_symbols]`` next states (-1: no edge) from the dfa column's ``symbol -> state`` maps."""
    table = np.full((m, num_symbols), -1, dtype=np.int64)
    for s, edges in enumerate(trans):
        for sym, target in edges.items():
            if sym not in letters:
                raise ConfigError(f"{where}: dfa symbol {sym!r} is not one of the {num_symbols} letters")
            table[s, letters[sym]] = int(target)
    return table


def _replay(
    text: str, dfa: np.ndarray, letters: dict[str, int], sep: int, where: str
) -> tuple[list[int], list[int]]:
    """The tokens of ``text`` (``sep``: the separator's) and the automaton's state after each."""
    toks, states, state = [], [], 0
    for c in text:
        if c == SEPARATOR_CHAR:
            toks.append(sep)
            state = 0
        elif c in letters:
            nxt = dfa[state, letters[c]]
            if nxt < 0:
                raise ConfigError(f"{where}: the automaton rejects symbol {c!r} at character {len(toks)}")
            toks.append(letters[c] + 1)
            state = int(nxt)
        else:
            raise ConfigError(f"{where}: character {c!r} is neither a symbol letter nor {SEPARATOR_CHAR!r}")
        states.append(state)
    return toks, states


def _stack_reference(
    strings: list[tuple[list[int], list[int]]],
    tables: list[np.ndarray],
    num_symbols: int,
    seq_len: int | None,
) -> TaskData:
    """Our RegBench arrays from each instance's (tokens, states) and minimal DFA, cut to ``seq_len``."""
    sep = num_symbols + 1
    sizes = [dfa.shape[0] for dfa in tables]
    L = seq_len or max(len(t) for t, _ in strings)
    n = len(strings)
    inputs = np.zeros((n, L), dtype=np.int64)
    state = np.full((n, L), -1, dtype=np.int8)
    transitions = np.full((n, max(12, max(sizes)), num_symbols), -1, dtype=np.int8)
    for i, ((toks, sts), dfa) in enumerate(zip(strings, tables)):
        k = min(len(toks), L)
        inputs[i, :k] = toks[:k]
        state[i, :k] = sts[:k]
        transitions[i, : dfa.shape[0]] = dfa
    labels = next_token_labels(inputs, sep)
    extras = {
        "scored": next_token_positions(inputs),
        "state": state,
        "transitions": transitions,
        "num_states": np.array(sizes, dtype=np.int16),
        "num_strings": ((inputs == sep).sum(axis=1) + 1).astype(np.int16),
        "length": (inputs != PAD).sum(axis=1).astype(np.int32),
    }
    return TaskData(inputs, labels, extras)
