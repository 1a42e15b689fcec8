"""RegBench interchange: our .npz + sidecar and the reference (berlino/seq_icl) TSV layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mixerzoo.baselines.regbench_files import (
    load_regbench,
    read_reference,
    write_reference,
    write_regbench,
)
from mixerzoo.cli.main import main
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import build_task


@pytest.fixture(scope="module")
def data():
    return build_task("regbench", preset="reference").make(12, 3, "test")


def test_round_trip_through_the_reference_layout(data, tmp_path):
    tsv = write_reference(data, tmp_path / "200_test.txt")
    first = tsv.read_text().splitlines()[0].split("\t")
    # the reference layout: input stops one symbol short, target (input shifted by one) holds it
    assert len(first) == 7 and "|" in first[0] and first[1][:-1] == first[0][1:]
    assert len(first[0]) == int(data.extras["length"][0]) - 1
    back = read_reference(tsv, num_symbols=18, seq_len=data.inputs.shape[1])
    np.testing.assert_array_equal(back.inputs, data.inputs)
    np.testing.assert_array_equal(back.labels, data.labels)
    np.testing.assert_array_equal(back.extras["state"], data.extras["state"])
    np.testing.assert_array_equal(back.extras["transitions"], data.extras["transitions"])
    np.testing.assert_array_equal(back.extras["num_strings"], data.extras["num_strings"])


def test_round_trip_through_our_layout_and_the_cli(data, tmp_path):
    npz = write_regbench(data, tmp_path / "rb.npz")
    assert json.loads((tmp_path / "rb.automata.json").read_text())["task"] == "regbench"
    loaded = load_regbench(npz)
    np.testing.assert_array_equal(loaded.inputs, data.inputs)
    main(["export-regbench", str(npz), "--out", str(tmp_path / "x.tsv")])
    main(["import-regbench", str(tmp_path / "x.tsv"), "--out", str(tmp_path / "y.npz"), "--seq-len", "1024"])
    np.testing.assert_array_equal(load_regbench(tmp_path / "y.npz").extras["state"], data.extras["state"])


def test_reads_the_reference_dataclass_repr(tmp_path):
    # DFA 0 -a-> 1, 1 -b-> 0, as the reference's DFA repr (np.int64 targets, an rng field)
    dfa = (
        "DFA(num_nodes=2, alphabet=('a', 'b'), transitions=({'a': np.int64(1)}, {'b': 0}), "
        "rng=Generator(PCG64))"
    )
    (tmp_path / "r.txt").write_text(f"abab|ab|a\tbab|ab|a\t\t{dfa}\t0\t0\t0\n")
    d = read_reference(tmp_path / "r.txt", num_symbols=2)
    np.testing.assert_array_equal(d.inputs[0], [1, 2, 1, 2, 3, 1, 2, 3, 1])
    np.testing.assert_array_equal(d.extras["state"][0], [1, 0, 1, 0, 0, 1, 0, 0, 1])


def test_import_keeps_the_last_symbol_held_in_the_target_column(tmp_path):
    # instance "abab|ab|a": the reference's input column stops at "abab|ab|", its target ends in "a"
    dfa = '{"num_nodes": 2, "alphabet": ["a", "b"], "transitions": [{"a": 1}, {"b": 0}]}'
    (tmp_path / "r.txt").write_text(f"abab|ab|\tbab|ab|a\tbab|ab|a\t{dfa}\t0\t0\t0\n")
    d = read_reference(tmp_path / "r.txt", num_symbols=2)
    np.testing.assert_array_equal(d.inputs[0], [1, 2, 1, 2, 3, 1, 2, 3, 1])
    assert d.labels[0, 7] == 1  # the last symbol is a scored target
    assert int(d.extras["length"][0]) == 9
    (tmp_path / "bad.txt").write_text(f"abab|ab|\tbbb|ab|a\t\t{dfa}\n")
    with pytest.raises(ConfigError, match="not the input shifted by one"):
        read_reference(tmp_path / "bad.txt", num_symbols=2)


def test_bad_reference_files_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_reference(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text(
        'ba\t\t\t{"num_nodes": 1, "alphabet": ["a"], "transitions": [{"a": 0}]}\n'
    )
    with pytest.raises(ConfigError, match="rejects symbol 'b'"):
        read_reference(tmp_path / "bad.txt", num_symbols=2)


def test_baselines_cli_scores_a_file_and_rejects_bad_input(data, tmp_path, capsys):
    npz = write_regbench(data, tmp_path / "rb.npz")
    main(
        ["baselines", "run", "ngram", "--set", "n=3", "--data", str(npz), "--json", str(tmp_path / "o.json")]
    )
    out = json.loads((tmp_path / "o.json").read_text())
    assert 0 < out["accuracy"] <= 1 and 0 <= out["tvd"] <= 1 and out["max_row_sum_error"] < 1e-5
    assert out["rows_sum_to_one"] is False  # the default n-gram is the authors' form
    for argv in (
        ["baselines", "run", "nope", "--data", str(npz)],
        ["baselines", "run", "ngram", "--set", "q=1", "--data", str(npz)],
        ["baselines", "run", "ngram", "--data", str(tmp_path / "none.npz")],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
