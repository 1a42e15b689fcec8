import os

import pytest
import torch

torch.set_num_threads(int(os.environ.get("MIXERZOO_TEST_THREADS", "1")))


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results"
