"""The scorecard's cost columns: training throughput and peak memory as the length grows, the
fitted exponents of time and memory per sequence (``mixerzoo bench``'s protocol and fits,
``training/throughput.py``: each length in a fresh process, the batch shrinking so that every
step holds the same tokens), the state held at the longest length and the parameters.
"""

from __future__ import annotations

from typing import Any

from mixerzoo.studies.scorecard.battery import Efficiency
from mixerzoo.studies.scorecard.candidate import Candidate, inference_state


def measure(cand: Candidate, eff: Efficiency, log=None) -> dict[str, Any]:
    """One mixer's efficiency: per length tokens/s and peak MB, the two exponents, state, params."""
    from mixerzoo.training.throughput import batch_for_length, bench_point, scaling_fits

    rows = []
    for seq_len in eff.lengths:
        row = bench_point(
            timeout_s=eff.timeout_s,
            mixer=cand.mixer_spec(),
            seq_len=seq_len,
            batch=batch_for_length(seq_len, eff.tokens),
            d_model=eff.d_model,
            n_layers=eff.n_layers,
            steps=eff.steps,
            warmup=eff.warmup,
        )
        rows.append(row)
        if log is not None:
            rate = f"{row.tokens_per_s:,.0f} tokens/s" if row.tokens_per_s else f"{row.status}: {row.error}"
            log(f"  efficiency L={seq_len}: {rate}")
    fit = scaling_fits(rows)[0] if any(r.status == "ok" for r in rows) else {}
    model = {**cand.model, "d_model": eff.d_model, "n_layers": eff.n_layers}
    state, fixed = inference_state(model, max(eff.lengths))
    return {
        "lengths": list(eff.lengths),
        "tokens_per_s": [r.tokens_per_s for r in rows],
        "peak_mem_mb": [r.peak_mem_mb for r in rows],
        "status": [r.status if r.error is None else f"{r.status}: {r.error}" for r in rows],
        "time_exponent": fit.get("time_exponent"),
        "mem_exponent": fit.get("mem_exponent"),
        "params": next((r.params for r in rows if r.params is not None), None),
        "state": state,
        "fixed_state": fixed,
    }
