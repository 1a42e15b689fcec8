"""Reading never writes: ``results``, ``report``, ``plot``, ``check`` and ``run --dry-run`` open the
store read-only, work on a store in a read-only location, refuse another program's database (and
leave it as it was), and never create a typo'd or empty ``--results``.

Root ignores file modes, so ``chmod a-w`` proves nothing in these tests (they run as root): the
read-only location is a tmpfs remounted read-only, where the kernel refuses every write, and the
test is skipped where mounting is not allowed. The tests that always run compare every file's
bytes before and after instead.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mixerzoo.store.results import Owner, ResultsStore
from tests.robustness.conftest import mount, tmpfs

TINY = {
    "kind": "sweep",
    "name": "tiny-readonly",
    "paper": "test Fig. 0",
    "claim": "paper: every model solves it",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu", "lr": 1e-2},
    },
    "grid": {"data.task.seq_len": [8, 12]},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": []},
    "presets": {"quick": {}, "paper": {}},
}
RUN = {
    "name": "readonly-tiny",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}
SIDE_FILES = {"mixerzoo.sqlite-shm", "mixerzoo.sqlite-wal"}
EMPTY = hashlib.sha256(b"").hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root`` (directories as ``dir``)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def dead_owner() -> Owner:
    """The owner of an attempt whose process has ended (a sweep killed with SIGKILL)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return Owner(int(proc.stdout), Owner.current().host)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A store with two finished runs of a tiny experiment and one attempt left running by a dead
    process; returns (experiment file, store root). Tests copy it before use."""
    from mixerzoo.cli.main import main

    base = tmp_path_factory.mktemp("recorded")
    experiment = base / "tiny.yaml"
    experiment.write_text(yaml.safe_dump(TINY))
    root = base / "r"
    try:
        main(["study", "run", str(experiment), "--results", str(root), "--quiet"])
    except SystemExit as err:
        assert err.code in (0, None), err.code
    store = ResultsStore(root)
    store.start_run({"orphan": 1}, "d" * 64, "orphan", "tiny-readonly", owner=dead_owner())
    for extra in SIDE_FILES:  # as a store is left once its writers have closed it
        assert not (root / extra).exists()
    return experiment, root


def reading_commands(experiment: Path, root: Path, elsewhere: Path) -> dict[str, list]:
    return {
        "results": ["results", "--json", "--results", root],
        "attempts": ["results", "--attempts", "--results", root],
        "report": ["study", "report", experiment, "--results", root, "--out", elsewhere / "report.html"],
        "plot": ["study", "plot", experiment, "--results", root, "--out", elsewhere / "figures"],
        "check": ["study", "check", experiment, "--results", root],
        "dry-run": ["study", "run", experiment, "--dry-run", "--results", root],
    }


def assert_reads(name: str, out) -> None:
    assert out.code == 0 and "Traceback" not in out.err, out.err[-2000:]
    if name == "results":
        entries = {e["name"]: e for e in json.loads(out.out)}
        assert entries["orphan"]["status"] == "interrupted"  # shown as the reaper would record it
        assert "ended before the run finished" in entries["orphan"]["error"]
        assert sum(e["status"] == "finished" for e in entries.values()) == 2
    elif name == "attempts":
        assert "#1 interrupted" in out.out and out.out.count("#1 finished") == 2
    elif name in ("plot", "check"):
        assert "2/2 runs finished" in out.out  # the finished runs were found by their config hash
    elif name == "report":
        assert "ours:  tiny-readonly: accuracy_per_query" in out.out
    elif name == "dry-run":
        assert "2 runs, 2 finished, 0 to run" in out.out


# -- a read-only location: the kernel refuses every write --------------------------------------------
def remount_read_only(where: Path) -> None:
    mount("-o", "remount,ro", str(where))
    with pytest.raises(OSError) as err:  # what proves the location read-only, root included
        (where / "probe").write_text("x")
    assert err.value.errno == errno.EROFS


@pytest.fixture
def read_only_store(recorded, tmp_path):
    experiment, source = recorded
    with tmpfs(tmp_path / "ro", "16m") as where:
        shutil.copytree(source, where / "r")
        remount_read_only(where)
        yield experiment, where / "r"


@pytest.mark.parametrize("name", ["results", "attempts", "report", "plot", "check", "dry-run"])
def test_reading_commands_work_on_a_read_only_location_and_change_nothing(
    run_cli, read_only_store, tmp_path, name
):
    experiment, root = read_only_store
    before = snapshot(root)
    elsewhere = tmp_path / "out"
    out = run_cli(*reading_commands(experiment, root, elsewhere)[name])
    assert_reads(name, out)
    assert snapshot(root) == before
    if name == "report":
        assert (elsewhere / "report.html").is_file()
    if name == "plot":
        assert (elsewhere / "figures" / "tiny-readonly.png").is_file()


def test_a_writing_command_on_a_read_only_location_is_one_line(run_cli, read_only_store, tmp_path):
    _, root = read_only_store
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    before = snapshot(root)
    run_cli("train", config, "--results", root, "--quiet").clear_error(str(root))
    assert snapshot(root) == before


# -- a writable location: the database file is never written ----------------------------------------
@pytest.mark.parametrize("name", ["results", "attempts", "report", "plot", "check", "dry-run"])
def test_reading_commands_never_write_the_database(run_cli, recorded, tmp_path, name):
    experiment, source = recorded
    root = tmp_path / "r"
    shutil.copytree(source, root)
    before = snapshot(root)
    out = run_cli(*reading_commands(experiment, root, tmp_path / "out")[name])
    assert_reads(name, out)
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k not in SIDE_FILES} == before
    wal = root / "mixerzoo.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # SQLite's read-only side files hold no write
    with sqlite3.connect(f"file:{root / 'mixerzoo.sqlite'}?mode=ro&immutable=1", uri=True) as con:
        assert con.execute("SELECT count(*) FROM attempts WHERE outcome = 'running'").fetchone() == (1,)


def test_a_store_whose_side_files_cannot_be_made_is_read_immutable(run_cli, recorded, tmp_path):
    """Where SQLite cannot make its shared-memory file (a read-only directory, a full disk), the
    store is read as immutable: here a directory squats the file's name, which fails alike."""
    _, source = recorded
    root = tmp_path / "r"
    shutil.copytree(source, root)
    (root / "mixerzoo.sqlite-shm").mkdir()
    before = snapshot(root)
    out = run_cli("results", "--json", "--results", root)
    assert_reads("results", out)
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k != "mixerzoo.sqlite-wal"} == before
    assert after.get("mixerzoo.sqlite-wal", EMPTY) == EMPTY  # SQLite's try before the fallback


# -- what is not a mixerzoo store is refused untouched -----------------------------------------------
def foreign_database(path: Path, journal: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute(f"PRAGMA journal_mode={journal}")
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("command", ["results", "report", "plot", "check", "dry-run", "train"])
def test_another_programs_database_is_refused_and_left_byte_identical(run_cli, tmp_path, journal, command):
    root = tmp_path / "r"
    foreign_database(root / "mixerzoo.sqlite", journal)
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text(yaml.safe_dump(TINY))
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    before = snapshot(root)
    args = reading_commands(experiment, root, tmp_path / "out").get(command)
    args = args or ["train", config, "--results", root, "--quiet"]
    run_cli(*args).clear_error("is not a mixerzoo results store", "users")
    assert snapshot(root) == before


def test_a_garbage_file_and_an_empty_file_are_refused_untouched(run_cli, tmp_path):
    for name, data in (("garbage", b"not sqlite " * 500), ("empty", b"")):
        root = tmp_path / name
        root.mkdir()
        (root / "mixerzoo.sqlite").write_bytes(data)
        before = snapshot(root)
        run_cli("results", "--results", root).clear_error(str(root / "mixerzoo.sqlite"))
        assert snapshot(root) == before


def test_a_newer_schema_is_refused_untouched(run_cli, recorded, tmp_path):
    _, source = recorded
    root = tmp_path / "r"
    shutil.copytree(source, root)
    con = sqlite3.connect(root / "mixerzoo.sqlite")
    con.execute("PRAGMA user_version = 99")
    con.close()
    before = snapshot(root)
    run_cli("results", "--results", root).clear_error("schema 99", "upgrade mixerzoo")
    assert snapshot(root) == before


def test_a_schema_1_store_is_read_without_being_upgraded(run_cli, tmp_path):
    """Reading an earlier version's store upgrades a copy in memory; the file stays schema 1
    until a writing command upgrades it in place."""
    root = tmp_path / "old"
    shutil.copytree(Path(__file__).parents[1] / "experiments" / "fixtures" / "store_v1", root)
    before = snapshot(root)
    out = run_cli("results", "--json", "--results", root)
    assert out.code == 0, out.err
    entries = json.loads(out.out)
    assert len(entries) == 4 and sum(e["status"] == "finished" for e in entries) == 2
    assert sum(len(e["attempts"]) for e in entries) == 5
    finished = [e for e in entries if e["status"] == "finished"]
    assert all(Path(e["checkpoint"]).is_file() for e in finished)
    assert {k: v for k, v in snapshot(root).items() if k not in SIDE_FILES} == before
    with sqlite3.connect(f"file:{root / 'mixerzoo.sqlite'}?mode=ro&immutable=1", uri=True) as con:
        assert con.execute("PRAGMA user_version").fetchone() == (0,)
    upgraded = [r.to_json() for r in ResultsStore(root).runs()]  # the in-place upgrade agrees
    for entry in upgraded + entries:
        for attempt in entry["attempts"]:
            attempt.pop("end")  # a reaped attempt ends when it is found
    assert upgraded == entries


# -- damaged records and unusable paths: one line ----------------------------------------------------
@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        ("metrics_json = '{not json'", "the metrics of run"),
        ("metrics_json = '[1, 2]'", "is not a JSON object"),
        ("started_at = 'yesterday'", "started_at = 'yesterday'"),
        ("wall_s = x'00'", "wall_s"),
    ],
)
@pytest.mark.parametrize("command", ["results", "report"])
def test_a_malformed_attempt_row_is_one_line(run_cli, recorded, tmp_path, command, damage, needle):
    experiment, source = recorded
    root = tmp_path / "r"
    shutil.copytree(source, root)
    with sqlite3.connect(root / "mixerzoo.sqlite") as con:
        con.execute(f"UPDATE attempts SET {damage} WHERE outcome = 'finished'")
    args = (
        ["results", "--attempts"]
        if command == "results"
        else ["study", "report", experiment, "--out", tmp_path / "x.html"]
    )
    run_cli(*args, "--results", root).clear_error("is damaged", needle)


@pytest.mark.parametrize(
    "command", ["results", "study report", "study plot", "study check", "train", "study run"]
)
def test_an_empty_results_path_is_refused(run_cli, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    args = {"results": [], "train": [config], "study run": ["cat-mqar", "--dry-run"]}.get(
        command, ["cat-mqar"]
    )
    assert "''" in run_cli(*command.split(), *args, "--results", "").clear_error("--results")
    assert sorted(os.listdir(tmp_path)) == ["run.yaml"]  # nothing made in the current directory


def test_a_typod_results_directory_is_not_created_for_a_theory_experiment(run_cli, tmp_path):
    run_cli("study", "report", "cat-fig4", "--results", tmp_path / "typo").clear_error("does not exist")
    assert not (tmp_path / "typo").exists()


def test_a_dry_run_does_not_create_the_store(run_cli, tmp_path):
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text(yaml.safe_dump(TINY))
    out = run_cli("study", "run", experiment, "--dry-run", "--results", tmp_path / "new")
    assert out.code == 0 and "2 runs, 0 finished, 2 to run" in out.out
    assert not (tmp_path / "new").exists()


def test_checkpoints_being_a_file_is_one_line(run_cli, tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "checkpoints").write_text("not a directory")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    run_cli("train", config, "--results", root, "--quiet").clear_error("checkpoints", "is a file")
    assert sorted(os.listdir(root)) == ["checkpoints"]
