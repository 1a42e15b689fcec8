"""torchrun with 2 CPU processes (gloo): DDP gradients equal single-process ones on the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from mixerzoo.model import build_model
from mixerzoo.training.lm import CHECKPOINT, NextTokenLoss, read_checkpoint
from mixerzoo.training.lm_config import load_lm_config
from mixerzoo.training.lm_steps import get_batch

TEXT = "to be, or not to be, that is the question. " * 100

# each rank takes its half of one global batch, through the same DDP wrapping train_lm uses; then
# both ranks run train_lm itself for a few steps
WORKER = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from mixerzoo.model import build_model
    from mixerzoo.training.lm import NextTokenLoss, setup_distributed, train_lm, wrap_distributed
    from mixerzoo.training.lm_config import load_lm_config
    from mixerzoo.training.lm_steps import finish_distributed, get_batch

    raw, grads_out, run_out = json.loads(open(sys.argv[1]).read()), sys.argv[2], sys.argv[3]
    cfg, corpus = load_lm_config(raw)
    info = setup_distributed("cpu")
    torch.manual_seed(0)
    model = build_model(cfg.model)
    step = wrap_distributed(NextTokenLoss(model), info)
    x, y = get_batch(corpus.splits["train"], 8, cfg.train.block_size, np.random.default_rng(5))
    half = slice(4 * info.rank, 4 * info.rank + 4)
    step(x[half], y[half]).backward()
    if info.rank == 0:
        torch.save({n: p.grad for n, p in model.named_parameters()}, grads_out)
    result = train_lm(cfg, corpus, run_out)
    if info.rank == 0:
        print(json.dumps({"world": info.world_size, "steps": result.steps}))
    finish_distributed()
    raise SystemExit("finish_distributed returned")  # it exits the process itself
    """
)


@pytest.mark.slow
def test_torchrun_two_cpu_processes(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text(TEXT)
    raw = {
        "corpus": {"name": "char", "data_dir": str(tmp_path / "data")},
        "model": {"d_model": 16, "n_layers": 2, "mixer": {"name": "attention", "num_heads": 2}},
        "train": {"steps": 3, "batch_size": 2, "block_size": 8, "eval_iters": 1, "device": "cpu"},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(raw))
    (tmp_path / "worker.py").write_text(WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [str(tmp_path / "cfg.json"), str(tmp_path / "grads.pt"), str(tmp_path / "run")]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run([*cmd, str(tmp_path / "worker.py"), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"world": 2, "steps": 3}

    # single process, whole global batch: the mean over 8 blocks = the mean of the two ranks' means
    cfg, corpus = load_lm_config(raw)
    torch.manual_seed(0)
    model = build_model(cfg.model)
    x, y = get_batch(corpus.splits["train"], 8, cfg.train.block_size, np.random.default_rng(5))
    NextTokenLoss(model)(x, y).backward()
    ddp_grads = torch.load(tmp_path / "grads.pt")
    for name, p in model.named_parameters():
        assert torch.allclose(ddp_grads[name], p.grad, atol=1e-5, rtol=0), name

    ckpt = read_checkpoint(tmp_path / "run" / CHECKPOINT)
    assert ckpt["step"] == 3 and len(ckpt["rng"]) == 2
    assert ckpt["rng"][0] != ckpt["rng"][1]  # each rank draws its own blocks
    assert (tmp_path / "run" / "result.json").is_file()
