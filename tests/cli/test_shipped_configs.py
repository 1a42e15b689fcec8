import re
from pathlib import Path

import pytest
import yaml

from mixerzoo.config import load_run_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


def flat(value):
    """A validated spec ``{"name", "params"}`` written back in the file's flat ``{name, **params}`` form."""
    if isinstance(value, dict) and set(value) == {"name", "params"}:
        return {"name": value["name"], **value["params"]}
    return value


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_run_configs_validate_to_what_the_file_says(path):
    raw = yaml.safe_load(path.read_text())
    cfg = load_run_config(path)
    dump = cfg.model_dump(mode="json")
    for section in ("data", "model", "train"):
        for key, value in (raw.get(section) or {}).items():
            written = {"name": value} if key in ("task", "mixer") and isinstance(value, str) else value
            assert flat(dump[section][key]) == written, f"{path.name}: {section}.{key}"
    # the hash: sha256 hex of the config, stable through a JSON round trip, changed by any value
    assert re.fullmatch(r"[0-9a-f]{64}", cfg.config_hash())
    assert load_run_config(dump).config_hash() == cfg.config_hash()
    changed = {**dump, "train": {**dump["train"], "seed": dump["train"]["seed"] + 1}}
    assert load_run_config(changed).config_hash() != cfg.config_hash()
