import re
from pathlib import Path

import pytest
import yaml

from mixerzoo.config import load_run_config

ALL = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))
#: language-model run configs (``mixerzoo train-lm``) name a corpus; the rest are task run configs
LM_CONFIGS = [p for p in ALL if "corpus" in yaml.safe_load(p.read_text())]
CONFIGS = [p for p in ALL if p not in LM_CONFIGS]


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


@pytest.mark.parametrize("path", LM_CONFIGS, ids=[p.name for p in LM_CONFIGS])
def test_shipped_lm_configs_validate_to_what_the_file_says(path, tmp_path):
    from mixerzoo.training.lm_config import load_lm_config

    raw = yaml.safe_load(path.read_text())
    (tmp_path / "input.txt").write_text("a small text for the char corpus. " * 400)
    data_dir = str(tmp_path) if raw["corpus"]["name"] == "char" else None
    cfg, corpus = load_lm_config(path, data_dir=data_dir, cache_dir=str(tmp_path / "cache"))
    dump = cfg.model_dump(mode="json")
    for section in ("model", "train"):
        for key, value in (raw.get(section) or {}).items():
            written = {"name": value} if key == "mixer" and isinstance(value, str) else value
            assert flat(dump[section][key]) == written, f"{path.name}: {section}.{key}"
    assert cfg.model.vocab_size == corpus.vocab_size
