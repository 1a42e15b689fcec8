"""Probes of the ``mixerzoo`` options a careless or hostile user can mistype: each is one clear line.

Before the fixes: ``--set seq_len=[1`` and ``--seed -1`` ended in tracebacks, ``seq_len=1e9`` and
``--n 1e12`` in numpy allocation errors after seconds of work, and ``--out X`` wrote ``X.npz``
while saying it wrote ``X``.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--set", "seq_len=[1"], ["line 1, column 3", "--set"]),
        (["--set", "seq_len={a"], ["--set", "not valid YAML"]),
        (["--set", "=3"], ["expected key=value"]),
        (["--set", "seq_len"], ["expected key=value"]),
        (["--set", "seq_len=8", "--set", "seq_len=16"], ["given twice"]),
        (["--set", "seq_len=inf"], ["seq_len"]),
        (["--set", "seq_len=.nan"], ["seq_len"]),
        (["--set", "power_a=.inf"], ["power_a", "finite"]),
        (["--set", "seq_len=-8"], ["seq_len"]),
        (["--set", "seq_len=true"], ["a boolean is not a number"]),
        (["--set", "seq_len=[8, 16]"], ["seq_len"]),
        (["--set", "seq_len=&a [*a]"], ["refers to itself"]),
        (["--set", "seq_lenn=8"], ["did you mean 'seq_len'"]),
        (["--seed", "-1"], ["--seed"]),
        (["--seed", "1.5"], ["--seed"]),
        (["--n", "0"], ["--n"]),
        (["--n", "-5"], ["--n"]),
        (["--split", "dev"], ["--split"]),
    ],
)
def test_bad_data_options(run_cli, tmp_path, args, needles):
    run_cli("data", "mqar", *args, "--out", tmp_path / "x.npz").clear_error(*needles)
    assert not list(tmp_path.iterdir())


def test_unknown_task_suggests_the_closest_name(run_cli, tmp_path):
    msg = run_cli("data", "mqar_ct", "--out", tmp_path / "x.npz").clear_error("unknown task")
    assert "did you mean 'mqar_cat'" in msg


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--set", "seq_len=1000000000"], ["16.0 TB", "lower n or seq_len"]),
        (["--n", "1000000000000"], ["at least", "lower n or seq_len"]),
        (["--n", "10000000000", "--set", "seq_len=1024"], ["at least"]),
    ],
)
def test_sizes_that_cannot_fit_are_refused_up_front(run_cli, tmp_path, args, needles):
    """n x seq_len x 16 bytes (int64 inputs and labels) is a lower bound; past the machine's memory
    the command says so at once instead of allocating."""
    run_cli("data", "mqar", *args, "--out", tmp_path / "x.npz").clear_error(*needles)


def test_the_memory_bound_is_the_arrays_own_size():
    from mixerzoo.tasks import build_task

    task = build_task("mqar", seq_len=64)
    d = task.make(10, 0)
    assert d.inputs.nbytes + d.labels.nbytes == 10 * task.bytes_per_example()


@pytest.mark.parametrize(
    "out,written", [("plain", "plain.npz"), ("a.npz", "a.npz"), ("sub/b.data", "sub/b.data.npz")]
)
def test_data_out_names_the_file_it_wrote(run_cli, tmp_path, out, written):
    r = run_cli("data", "mqar", "--n", "4", "--set", "seq_len=16", "--out", tmp_path / out)
    assert r.code == 0, r.err
    path = tmp_path / written
    assert f"to {path} " in r.out
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.npz")) == [written]
    assert np.load(path)["inputs"].shape == (4, 16)


def test_data_out_into_a_directory_is_a_clear_error(run_cli, tmp_path, monkeypatch):
    (tmp_path / "d.npz").mkdir()
    run_cli("data", "mqar", "--n", "4", "--out", tmp_path / "d.npz").clear_error()
    monkeypatch.chdir(tmp_path)
    for out in ("", " ", "sub/"):
        run_cli("data", "mqar", "--n", "4", "--out", out).clear_error("give a file path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz"]  # no hidden '.npz' written


def test_set_name_is_a_parameter_error_not_a_crash(run_cli, tmp_path):
    """``--set name=...`` once collided with build_task's own ``name`` argument (a TypeError)."""
    run_cli("data", "mqar", "--set", "name=mqnar", "--out", tmp_path / "x.npz").clear_error("unknown field")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["tasks", "--bogus"], "No such option"),
        (["nonexistent-command"], "No such command"),
        (["data"], "Missing argument"),
        (["eval", "x.pt"], "does not exist"),
        (["train"], "Missing argument"),
    ],
)
def test_usage_errors(run_cli, args, needle):
    run_cli(*args).clear_error(needle)
