"""Runs: what happens to one run, from its start to its record in the store: the one lifecycle
every run goes through (:mod:`~mixerzoo.runs.lifecycle`), a task run (:mod:`~mixerzoo.runs.task`),
a language-model run (:mod:`~mixerzoo.runs.lm`), their tracking (W&B, TensorBoard, CSV), user code
named by import path, and the quick demo."""
