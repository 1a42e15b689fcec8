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
