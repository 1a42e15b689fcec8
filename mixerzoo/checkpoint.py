"""Checkpoints: one file format for every model mixerzoo saves, read without pickle.

    save_checkpoint(path, "lm", {"config": {...}, "model": model.state_dict(), "step": 40, ...})
    ckpt = load_checkpoint(path)            # Checkpoint(kind="lm", state={...}, version=2)
    model = model_from_checkpoint(ckpt, ckpt.config["model"])

A checkpoint is one safetensors file. Its tensors (model weights, optimizer moments, torch RNG
states) are the file's tensors, named by where they sit in the state (``model/embed.weight``,
``optimizer/state/0/exp_avg``); everything else (the run config, step, history, optimizer
hyper-parameters and parameter groups, numpy RNG states) is JSON in the file's metadata under
the key ``mixerzoo``, with the format version and the kind: ``task`` (a run of ``mixerzoo
train``, in the results store) or ``lm`` (``mixerzoo lm train --out DIR``, ``DIR/checkpoint.pt``).
Writing is atomic: a temporary file, then a rename.

Reading never unpickles. Files written before this format (``torch.save`` zip files) are read
with ``torch.load(weights_only=True)``, which admits tensors, numbers, strings and containers
only; a file that needs anything else (any pickled object, which could run code while loading)
is refused in one line. Every problem with a file is one :class:`ConfigError` line naming it.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from mixerzoo import __version__
from mixerzoo.config import RunConfig
from mixerzoo.model import ModelConfig, build_model
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError

#: the metadata key holding the JSON part, and the value of its "format" entry
FORMAT = "mixerzoo"
#: 1: a torch.save dict (earlier versions); 2: safetensors + JSON (this one)
VERSION = 2
KINDS = {"task": "task-run", "lm": "language-model"}
#: the checkpoint file of a ``mixerzoo lm train --out DIR`` folder
LM_CHECKPOINT = "checkpoint.pt"


@dataclass
class Checkpoint:
    path: Path
    kind: str  # "task" or "lm"
    #: the saved state: "config" (a dict) and "model" (a state dict) always; for kind "lm" also
    #: "config_hash", "step", "optimizer", "scaler", "rng", "torch_rng", "history"
    state: dict[str, Any]
    version: int

    @property
    def config(self) -> dict[str, Any]:
        return self.state["config"]

    def require(self, *keys: str) -> None:
        """One line naming the first of ``keys`` the checkpoint lacks."""
        missing = [k for k in keys if k not in self.state]
        if missing:
            raise ConfigError(f"checkpoint {str(self.path)!r} is incomplete: it has no {missing[0]!r}")

    def fail(self, what: str) -> ConfigError:
        return ConfigError(f"checkpoint {str(self.path)!r}: {what}")


# -- writing ----------------------------------------------------------------------------
def save_checkpoint(path: str | os.PathLike, kind: str, state: dict[str, Any]) -> None:
    """Write ``state`` (nested dicts, lists, tuples, numbers, strings, tensors) atomically to ``path``.

    A failed write (a full disk) removes its temporary file and raises; the previous checkpoint,
    if any, is left as it was.
    """
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: one of {', '.join(KINDS)}")
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _split(state, "", tensors, set())
    header = {"format": FORMAT, "version": VERSION, "kind": kind, "mixerzoo_version": __version__}
    metadata = {FORMAT: json.dumps({**header, "state": skeleton})}
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.touch()  # its mode follows the umask; safetensors would leave a new file private (0600)
        mode = tmp.stat().st_mode & 0o777
        save_file(tensors, str(tmp), metadata=metadata)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _split(obj: Any, name: str, tensors: dict[str, torch.Tensor], storages: set[int]) -> Any:
    """``obj`` as JSON, each tensor replaced by ``{"$tensor": its name}`` and put in ``tensors``."""
    if isinstance(obj, torch.Tensor):
        key = name or "tensor"
        while key in tensors:
            key += "'"
        t = obj.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in storages:  # tied weights share memory: safetensors stores each tensor on its own
            t = t.clone()
        storages.add(t.untyped_storage().data_ptr())
        tensors[key] = t
        return {"$tensor": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _split(v, _join(name, k), tensors, storages) for k, v in obj.items()}
        return {
            "$dict": [
                [_split(k, "", {}, set()), _split(v, _join(name, str(k)), tensors, storages)]
                for k, v in obj.items()
            ]
        }
    if isinstance(obj, tuple):
        return {"$tuple": [_split(v, _join(name, str(i)), tensors, storages) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_split(v, _join(name, str(i)), tensors, storages) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"a checkpoint holds tensors, numbers, strings and containers, not {type(obj).__name__}")


def _join(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


# -- reading ----------------------------------------------------------------------------
def load_checkpoint(path: str | os.PathLike, kind: str | None = None) -> Checkpoint:
    """Read a checkpoint of this version or an earlier one; ``kind`` (if given) must match."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"checkpoint {str(p)!r} does not exist" + (" as a file" if p.exists() else ""))
    ckpt = _read_safetensors(p) if _is_safetensors(p) else _read_torch_file(p)
    if kind is not None and ckpt.kind != kind:
        raise ckpt.fail(f"it is a {KINDS[ckpt.kind]} checkpoint, not a {KINDS[kind]} one")
    if not isinstance(ckpt.state.get("config"), dict) or "model" not in ckpt.state:
        raise ckpt.fail("it has no config or no model weights (not a complete mixerzoo checkpoint)")
    return ckpt


def _is_safetensors(p: Path) -> bool:
    """A safetensors file starts with its header's length (8 bytes) and then the JSON header."""
    try:
        with p.open("rb") as fh:
            head = fh.read(9)
    except OSError as err:
        raise ConfigError(f"checkpoint {str(p)!r} could not be read: {err.strerror or err}") from None
    return len(head) == 9 and head[8:9] == b"{"


def _read_safetensors(p: Path) -> Checkpoint:
    try:
        with safe_open(str(p), framework="pt") as fh:
            meta = (fh.metadata() or {}).get(FORMAT)
            tensors = {k: fh.get_tensor(k) for k in fh.keys()} if meta is not None else {}
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ConfigError(f"checkpoint {str(p)!r} could not be read: {_first_line(err)}") from None
    if meta is None:
        raise ConfigError(f"checkpoint {str(p)!r} is not a mixerzoo checkpoint (no {FORMAT!r} metadata)")
    try:
        header = json.loads(meta)
        version, kind = header["version"], header["kind"]
    except (ValueError, TypeError, KeyError, RecursionError) as err:
        raise ConfigError(f"checkpoint {str(p)!r} is damaged: its metadata is not valid ({err})") from None
    if not isinstance(version, int) or version > VERSION:
        raise ConfigError(
            f"checkpoint {str(p)!r} has format version {version!r}; this mixerzoo reads versions up to "
            f"{VERSION} (a newer mixerzoo wrote it?)"
        )
    if kind not in KINDS:
        raise ConfigError(f"checkpoint {str(p)!r} is damaged: unknown kind {kind!r}")
    try:
        state = _rebuild(header.get("state"), tensors)
    except (KeyError, TypeError, ValueError, RecursionError) as err:
        raise ConfigError(f"checkpoint {str(p)!r} is damaged: {_first_line(err)}") from None
    if not isinstance(state, dict):
        raise ConfigError(f"checkpoint {str(p)!r} is damaged: its state is not a mapping")
    return Checkpoint(p, kind, state, version)


def _rebuild(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`_split`."""
    if isinstance(obj, list):
        return [_rebuild(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "$tensor" in obj:
        if obj["$tensor"] not in tensors:
            raise KeyError(f"tensor {obj['$tensor']!r} is missing")
        return tensors[obj["$tensor"]]
    if "$tuple" in obj:
        return tuple(_rebuild(v, tensors) for v in obj["$tuple"])
    if "$dict" in obj:
        return {_rebuild(k, tensors): _rebuild(v, tensors) for k, v in obj["$dict"]}
    return {k: _rebuild(v, tensors) for k, v in obj.items()}


def _read_torch_file(p: Path) -> Checkpoint:
    """A checkpoint of an earlier version: a ``torch.save`` dict, read with ``weights_only=True``."""
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on stderr: one line only
            warnings.simplefilter("ignore")
            payload = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        if found is None:
            raise ConfigError(
                f"checkpoint {str(p)!r} could not be read: neither a safetensors file nor a torch file of "
                "tensors"
            ) from None
        raise ConfigError(
            f"checkpoint {str(p)!r} refused: loading it needs pickle (it names {found.group(1)}), which "
            "can run code; a mixerzoo checkpoint never needs pickle"
        ) from None
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file: one line
        raise ConfigError(f"checkpoint {str(p)!r} could not be read: {_first_line(err)}") from None
    if isinstance(payload, dict) and "config_json" in payload and "state_dict" in payload:
        try:
            config = json.loads(payload["config_json"])
        except (TypeError, ValueError) as err:
            raise ConfigError(f"checkpoint {str(p)!r}: its config is not valid here: {err}") from None
        state = {"config": config, "model": payload["state_dict"]}
        return Checkpoint(p, "task", state, 1)
    if isinstance(payload, dict) and payload.get("format") == 1:
        state = {k: v for k, v in payload.items() if k != "format"}
        return Checkpoint(p, "lm", state, 1)
    raise ConfigError(f"checkpoint {str(p)!r} is not a mixerzoo checkpoint")


def _first_line(err: BaseException) -> str:
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__


# -- the model --------------------------------------------------------------------------
def task_config(ckpt: Checkpoint) -> RunConfig:
    """The run config of a task-run checkpoint, validated as this version reads run configs."""
    try:
        return validate(RunConfig, ckpt.config)
    except ConfigError as err:
        raise ckpt.fail(f"its config is not valid here: {err}") from None


def load_model(ckpt: Checkpoint) -> tuple[torch.nn.Module, ModelConfig]:
    """The model of a checkpoint of either kind (eval mode, CPU) and its model config."""
    if ckpt.kind == "task":
        cfg = task_config(ckpt).model
    else:
        try:
            cfg = validate(ModelConfig, ckpt.config.get("model"), where="model")
        except ConfigError as err:
            raise ckpt.fail(f"its config is not valid here: {err}") from None
    return model_from_checkpoint(ckpt, cfg), cfg


def model_from_checkpoint(ckpt: Checkpoint, config: ModelConfig | dict[str, Any]) -> torch.nn.Module:
    """The model ``config`` describes, with the checkpoint's weights (eval mode, on the CPU).

    The config is first built on the meta device (no memory): a config whose model cannot be
    built, does not fit this machine, or whose weights differ from the checkpoint's is one line
    before anything is allocated.
    """
    try:
        cfg = config if isinstance(config, ModelConfig) else validate(ModelConfig, config, where="model")
    except ConfigError as err:
        raise ckpt.fail(f"its config is not valid here: {err}") from None
    weights = ckpt.state["model"]
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise ckpt.fail("its model weights are not a mapping of names to tensors")
    meta = _meta_model(ckpt, cfg)
    if meta is not None:
        _check_shapes(ckpt, meta, weights)
    model = build_model(cfg)
    try:
        model.load_state_dict(weights)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ckpt.fail(f"its weights do not match its config's model: {_first_line(err)}") from None
    return model.eval()


def _meta_model(ckpt: Checkpoint, cfg: ModelConfig) -> torch.nn.Module | None:
    """The model on the meta device (None if its construction computes with tensor values)."""
    try:
        with torch.device("meta"):
            model = build_model(cfg)
    except (ConfigError, ValueError, TypeError, RuntimeError, MemoryError, OverflowError) as err:
        if isinstance(err, (NotImplementedError, RuntimeError)) and "meta" in str(err).lower():
            return None  # needs real values while it is built: the checks below are skipped
        raise ckpt.fail(f"its config's model cannot be built: {_first_line(err)}") from None
    needed = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None
    if available and needed > available:
        raise ckpt.fail(
            f"its config's model needs {needed / 2**30:,.1f} GiB, more than this machine's memory "
            f"({available / 2**30:,.1f} GiB)"
        )
    return model


def _check_shapes(ckpt: Checkpoint, meta: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    expected = {k: tuple(v.shape) for k, v in meta.state_dict().items()}
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    wrong = [k for k in expected if k in weights and tuple(weights[k].shape) != expected[k]]
    if missing:
        what = f"missing {missing[0]!r}"
    elif extra:
        what = f"unexpected {extra[0]!r}"
    elif wrong:
        k = wrong[0]
        what = f"{k!r} has shape {list(weights[k].shape)}, the config's model {list(expected[k])}"
    else:
        return
    raise ckpt.fail(f"its weights do not match its config's model ({what})")
