import os

import pytest
import torch

torch.set_num_threads(int(os.environ.get("MIXERZOO_TEST_THREADS", "1")))


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results"


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
