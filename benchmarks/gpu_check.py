"""Every registered sequence mixer on a CUDA device against the same model on the CPU (docs/gpu.md).

For each mixer and each of its ``examples`` parameter sets: a 2-layer model is built on the CPU
with a fixed seed and copied to the GPU; the same batch goes through both in float32 (TF32 off),
and the logits and every parameter's gradient are compared (largest difference relative to the
CPU value's largest magnitude, magnitudes below 1e-6 counting as zero); then one
bfloat16-autocast training step runs on the GPU and its loss must be finite. The models run in
training mode, as a training step does; a mixer whose training-mode forward draws random numbers
(sparse attention with random or learned selection: two calls differ on the CPU itself) is
compared in eval mode instead, and one that is random in eval mode too is reported as stochastic.
Prints one row per case and a summary; exits 1 if any case fails.

    python benchmarks/gpu_check.py [--tol 1e-3] [--only NAME,NAME]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS

VOCAB, D, LAYERS, BATCH, LENGTH = 64, 32, 2, 2, 48


#: magnitudes below this count as zero: a gradient of 1e-11 on both devices is no disagreement
FLOOR = 1e-6


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(b.abs().max().item(), FLOOR)
    return (a.float().cpu() - b.float()).abs().max().item() / scale


def case(name: str, params: dict, tol: float, device: str = "cuda") -> tuple[bool, str]:
    torch.manual_seed(0)
    spec = {"vocab_size": VOCAB, "d_model": D, "n_layers": LAYERS, "mixer": {"name": name, **params}}
    cpu = build_model(spec).float()
    gpu = build_model(spec).float()
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.to(device)
    x = torch.randint(0, VOCAB, (BATCH, LENGTH))
    y = torch.randint(0, VOCAB, (BATCH, LENGTH))
    mode = "train"
    with torch.no_grad():
        if not torch.equal(cpu(x), cpu(x)):
            mode = "eval"
            cpu.eval()
            gpu.eval()
            if not torch.equal(cpu(x), cpu(x)):
                return True, "stochastic forward (differs between two calls on the CPU): not compared"
    out = {}
    for where, model in (("cpu", cpu), (device, gpu)):
        logits = model(x.to(where))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.to(where).reshape(-1))
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        out[where] = (logits.detach(), grads)
    logit_err = relative(out[device][0], out["cpu"][0])
    grad_err = max((relative(out[device][1][n], g) for n, g in out["cpu"][1].items()), default=0.0)
    missing = set(out["cpu"][1]) ^ set(out[device][1])
    gpu.train()
    gpu.zero_grad(set_to_none=True)
    with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
        logits = gpu(x.to(device))
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), y.to(device).reshape(-1))
    loss.backward()
    finite = bool(torch.isfinite(loss).item()) and all(
        torch.isfinite(p.grad).all().item() for p in gpu.parameters() if p.grad is not None
    )
    ok = logit_err <= tol and grad_err <= tol and not missing and finite
    text = f"logits {logit_err:.1e}  grads {grad_err:.1e}  bf16 step {'finite' if finite else 'NOT FINITE'}"
    if mode == "eval":
        text += "  (compared in eval mode: random in training mode)"
    if missing:
        text += f"  gradient only on one device: {sorted(missing)[:3]}"
    return ok, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cuda", help="cuda (cpu: the script's own check, CPU against CPU)")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"torch {torch.__version__}, {where}; d = {D}, L = {LENGTH}, tol {args.tol}")
    names = [n for n in SEQUENCE_MIXERS.names() if not args.only or n in args.only.split(",")]
    failed = []
    start = time.perf_counter()
    for name in names:
        for i, params in enumerate(SEQUENCE_MIXERS.get(name).examples):
            label = f"{name}-{i}"
            try:
                ok, text = case(name, params, args.tol, args.device)
            except Exception as err:  # a device bug shows as an exception: report it and go on
                ok, text = False, f"error: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
            print(f"{'ok  ' if ok else 'FAIL'} {label:<34} {text}", flush=True)
            if not ok:
                failed.append(label)
    total = sum(len(SEQUENCE_MIXERS.get(n).examples) for n in names)
    print(f"{total - len(failed)} of {total} cases pass in {time.perf_counter() - start:.1f} s")
    if failed:
        print("failed: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
