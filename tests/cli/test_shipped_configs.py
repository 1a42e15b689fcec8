from pathlib import Path

import pytest

from mixerzoo.config import load_run_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_run_configs_validate(path):
    cfg = load_run_config(path)
    assert cfg.config_hash()
