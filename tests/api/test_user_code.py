"""A mixer defined outside the package: by import path, by entry point, by decorator in a user's
module, through one process, ``--workers 2`` (spawned processes) and a local Ray instance.

Each test writes its own module (a name of its own, so no test sees another's import) to
``tmp_path`` and puts that folder on ``sys.path``; spawned workers inherit ``sys.path`` and Ray
workers are sent it. The entry point is a ``.dist-info`` folder with an ``entry_points.txt``
beside the module, found by ``importlib.metadata`` on ``sys.path`` as an installed package's is.
"""

from __future__ import annotations

import itertools
import re
import sys
import types

import pytest
import yaml

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore

TAGS = itertools.count()
MIXER_SOURCE = '''
import torch
from torch import nn
from mixerzoo.mixers import SEQUENCE_MIXERS, SequenceMixer


class CumulativeMean(SequenceMixer):
    """y_t = W mean(x_1 .. x_t)."""

    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, input_ids=None, rope=None):
        steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device).view(1, -1, 1)
        return self.proj(x.cumsum(1) / steps)


@SEQUENCE_MIXERS.register("{registered}")
class Registered(CumulativeMean):
    pass


class NotAMixer:
    pass
'''


def write_plugin(root, module: str, registered: str, plugin: str) -> None:
    """``root/<module>.py`` with the mixers, and a dist-info offering one as entry point ``plugin``."""
    (root / f"{module}.py").write_text(MIXER_SOURCE.replace("{registered}", registered))
    info = root / f"{module}_dist-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}-dist\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[mixerzoo.mixers]\n{plugin} = {module}:CumulativeMean\n")


@pytest.fixture
def user_code(tmp_path, monkeypatch, request):
    """Names of this test's import path, decorator-registered mixer and plugin."""
    tag = f"{next(TAGS)}_{re.sub(r'[^a-z_]+', '_', request.node.originalname)}"
    module, registered, plugin = f"usermix_{tag}", f"registered_{tag}", f"plugin_{tag}"
    code = tmp_path / "code"
    code.mkdir()
    write_plugin(code, module, registered, plugin)
    monkeypatch.syspath_prepend(str(code))
    yield types.SimpleNamespace(
        module=module, path=f"{module}:CumulativeMean", registered=registered, plugin=plugin
    )
    SEQUENCE_MIXERS._items.pop(registered, None)
    sys.modules.pop(module, None)


def study(tmp_path, mixers: list[str]) -> str:
    spec = {
        "kind": "sweep",
        "name": "own-mixers",
        "base": {
            "data": {
                "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                "n_train": 32,
                "n_test": 16,
            },
            "model": {"d_model": 16, "n_layers": 1, "mixer": mixers[0]},
            "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
        },
        "grid": {"model.mixer": mixers},
        "presets": {"quick": {}, "paper": {}},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def finished_mixers(results) -> set[str]:
    runs = ResultsStore(results, read_only=True).runs()
    assert all(r.status == "finished" for r in runs), [r.error for r in runs]
    return {r.config["model"]["mixer"]["name"] for r in runs}


def test_import_path_and_plugin_resolve_to_the_class(user_code):
    by_path = SEQUENCE_MIXERS.get(user_code.path)
    by_plugin = SEQUENCE_MIXERS.get(user_code.plugin)
    assert by_path is by_plugin and by_path.__name__ == "CumulativeMean"
    assert user_code.plugin in SEQUENCE_MIXERS.plugin_names() and user_code.path in SEQUENCE_MIXERS


@pytest.mark.parametrize(
    "name,needle",
    [
        ("no_such_module_xyz:Mixer", "cannot import 'no_such_module_xyz'"),
        ("{module}:Missing", "has no 'Missing'"),
        ("{module}:NotAMixer", "not a sequence mixer (class NotAMixer; expected a class deriving from"),
        ("{module}:nn", "not a sequence mixer (module;"),
    ],
)
def test_a_bad_import_path_is_one_line(run_cli, tmp_path, user_code, name, needle):
    name = name.format(module=user_code.module)
    with pytest.raises(ConfigError, match="^sequence mixer") as err:
        SEQUENCE_MIXERS.get(name)
    assert needle in str(err.value) and "\n" not in str(err.value)
    code, out, err_text = run_cli(
        ["study", "run", study(tmp_path, [name]), "--results", tmp_path / "r", "--quiet"]
    )
    assert code == 2 and needle in err_text and "Traceback" not in err_text
    assert len(err_text.strip().splitlines()) == 1


def test_own_mixers_run_in_two_worker_processes(run_cli, tmp_path, user_code):
    __import__(user_code.module)  # registers `registered_*` in this process only, as a notebook's import
    mixers = [user_code.path, user_code.plugin, user_code.registered]
    code, out, err = run_cli(
        ["study", "run", study(tmp_path, mixers), "--workers", "2", "--results", tmp_path / "r"]
    )
    assert code == 0, err
    assert finished_mixers(tmp_path / "r") == set(mixers)


def test_own_mixers_run_on_a_local_ray_instance(run_cli, tmp_path, user_code):
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'mixerzoo[ray]'")
    __import__(user_code.module)
    mixers = [user_code.path, user_code.plugin, user_code.registered]
    argv = [
        "study",
        "run",
        study(tmp_path, mixers),
        "--executor",
        "ray",
        "--num-cpus",
        "1",
        "--results",
        tmp_path / "r",
    ]
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert finished_mixers(tmp_path / "r") == set(mixers)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_class_registered_in_a_notebook_is_refused_for_workers(monkeypatch, tmp_path, executor):
    from mixerzoo.config import load_run_config
    from mixerzoo.mixers import SequenceMixer
    from mixerzoo.runs.user_code import worker_modules

    notebook = types.ModuleType("__main__")  # an interactive session: no __file__
    monkeypatch.setitem(sys.modules, "__main__", notebook)
    cls = type("InNotebook", (SequenceMixer,), {"__module__": "__main__", "forward": lambda self, x, **k: x})
    SEQUENCE_MIXERS.register("in_notebook_probe")(cls)
    try:
        config = yaml.safe_load(open(study(tmp_path, ["in_notebook_probe"])))["base"]
        with pytest.raises(ConfigError, match="worker process cannot import: put the class in a module file"):
            worker_modules([load_run_config(config)], executor)
    finally:
        SEQUENCE_MIXERS._items.pop("in_notebook_probe")


def test_register_replace_lets_a_notebook_cell_run_again():
    from mixerzoo.mixers import SequenceMixer

    def cell():
        @SEQUENCE_MIXERS.register("cell_probe", replace=True)
        class Mine(SequenceMixer):
            pass

        return Mine

    try:
        first, second = cell(), cell()
        assert first is not second and SEQUENCE_MIXERS.get("cell_probe") is second
        with pytest.raises(RuntimeError, match="registered twice .*replace=True"):
            SEQUENCE_MIXERS.register("cell_probe")(type("Other", (SequenceMixer,), {}))
    finally:
        SEQUENCE_MIXERS._items.pop("cell_probe")


def test_a_state_mixer_and_a_task_by_import_path_train(tmp_path):
    import mixerzoo

    config = {
        "data": {
            "task": {"name": "mixerzoo.tasks.mqar:MQAR", "vocab_size": 32, "seq_len": 16},
            "n_train": 32,
        },
        "model": {"d_model": 16, "n_layers": 1, "mixer": "cat", "state_mixer": "mixerzoo.mixers.mlp:MLP"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    }
    rec = mixerzoo.train(config, results=tmp_path / "r", progress=False)
    assert rec.status == "finished" and rec.config["data"]["task"]["name"] == "mixerzoo.tasks.mqar:MQAR"
    bad = {**config, "model": {**config["model"], "state_mixer": "mixerzoo.mixers.cat:CAT"}}
    with pytest.raises(ConfigError, match="not a state mixer \\(class CAT; expected a class deriving from"):
        mixerzoo.train(bad, results=tmp_path / "r")
