import hashlib
import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(int(os.environ.get("MIXERZOO_TEST_THREADS", "1")))


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results"


@pytest.fixture
def tiny_text_dir(tmp_path):
    """A folder holding a small ``input.txt`` (the ``char`` corpus) for tiny end-to-end LM runs."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("Abishai and Asahel went up. Abishai saw Asahel. " * 40)
    return data


#: the shape and budget of the tiny language-model runs the LM studies' end-to-end tests train
TINY_LM = {
    "corpus": "char",
    "d_model": 16,
    "n_layers": 1,
    "num_heads": 2,
    "block_size": 16,
    "batch_size": 2,
    "steps": 2,
    "warmup": 0,
    "eval_tokens": 128,
    "threads": 1,
    "device": "cpu",
}


@pytest.fixture
def task_params(tmp_path):
    """``task_params(name)``: the parameters a registry-wide test builds task ``name`` with -- none,
    or, for a task that reads data files (``write_sample_files``), small sample files it writes
    in the standard format under ``tmp_path``."""
    from mixerzoo.tasks import TASKS

    def params(name: str) -> dict:
        writer = getattr(TASKS.get(name), "write_sample_files", None)
        return writer(tmp_path / "sample-files" / name) if writer else {}

    return params


@pytest.fixture
def run_cli(capsys):
    """``run_cli(argv) -> (exit code, stdout, stderr)`` of the ``mixerzoo`` command run in-process
    (a command that returns normally exits 0)."""
    from mixerzoo.cli.main import main

    def run(argv):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exit_info:
            code = exit_info.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def file_digests(root) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root`` (folders as ``dir``)."""
    root = Path(root)
    return {
        p.relative_to(root).as_posix(): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def read_only_digests(root) -> dict[str, str]:
    """``file_digests(root)`` less what SQLite's readers may leave by a store: its shared-memory
    file (``-shm``) and an empty write-ahead log (``-wal``); a write-ahead log holding a write stays."""
    empty = hashlib.sha256(b"").hexdigest()
    return {
        rel: digest
        for rel, digest in file_digests(root).items()
        if not rel.endswith("-shm") and not (rel.endswith("-wal") and digest == empty)
    }


@pytest.fixture
def read_only_use():
    """``read_only_use(folder) -> folder``: a folder built once per test run and shared by tests,
    which this test only reads; after the test every file under it must hold the bytes it held
    before, and no file may come or go (``read_only_digests``), so the tests sharing it stay
    independent of their order. A test that writes there works on its own copy instead."""
    watched = []

    def watch(folder):
        watched.append((folder, read_only_digests(folder)))
        return folder

    yield watch
    for folder, before in watched:
        after = read_only_digests(folder)
        assert after == before, f"{folder}: a test that only reads this shared folder changed it"


# -- the two tiers: `make test` (fast) and `make test-all` (everything) ------------------------
FULL_TIER_FILE = os.path.join(os.path.dirname(__file__), "full_tier.txt")


def full_tier_patterns() -> tuple[list[str], list[str]]:
    """``(full, kept)``: the node-id patterns of ``tests/full_tier.txt`` (``!`` lines kept fast)."""
    full, kept = [], []
    with open(FULL_TIER_FILE) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                (kept if line.startswith("!") else full).append(line.lstrip("!"))
    return full, kept


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects
def pytest_collection_modifyitems(config, items):
    """Mark the full tier's tests ``slow`` (``make test`` deselects them); when the whole suite is
    collected, a pattern that matches no test is an error, so the list cannot go stale."""
    from fnmatch import fnmatchcase

    def matches(node: str, pattern: str) -> bool:  # `*` and `?` are wildcards; brackets are text
        return fnmatchcase(node, pattern.replace("[", "[[]").replace("]", "[]]").replace("[[[]]", "[[]"))

    full, kept = full_tier_patterns()
    used = dict.fromkeys(full + kept, False)
    for item in items:
        node = item.nodeid
        hits = [p for p in full if matches(node, p)]
        keeps = [p for p in kept if matches(node, p)]
        for p in hits + keeps:
            used[p] = True
        if hits and not keeps:
            item.add_marker(pytest.mark.slow)
    whole = not config.args or [os.path.normpath(a) for a in config.args] == ["tests"]
    stale = [p for p, hit in used.items() if not hit]
    if whole and stale:
        raise pytest.UsageError("tests/full_tier.txt: no test matches " + "; ".join(stale))
