"""Checked computations that are not sweeps: the CAT paper's constructions and bounds (CAT
Secs. 4-5), and analyses that train, probe and compare models (ICLL Figs. 4-6, the LM AR-hit gap).

One module per result, each citing its statement and exposing ``PARAMS`` (a validated parameter
block), ``STATEMENT`` and ``run(params, log) -> Outcome``:

  * :mod:`~mixerzoo.theory.thm1_associative_recall` -- Thm. 1 / Cor. 1, CAT solves AR and MQAR;
  * :mod:`~mixerzoo.theory.thm2_length_generalization` -- Thm. 2, tools and a train-at-L run;
  * :mod:`~mixerzoo.theory.thm3_selective_copy` -- Thm. 3, CAT solves unique selective copying;
  * :mod:`~mixerzoo.theory.prop1_landmark_ar` -- Prop. 1's Landmark CAT on the real mixer;
  * :mod:`~mixerzoo.theory.props_monte_carlo` -- Props. 1-2 by Monte Carlo, Fig. 4;
  * :mod:`~mixerzoo.theory.zoology_primitives` -- Zoology's one-layer BaseConv primitives (Zoology App. H.3);
  * :mod:`~mixerzoo.theory.thm1_ngram_recall` -- Thm. 1 for N-gram keys, CAT solves MQNAR;
  * :mod:`~mixerzoo.theory.prop3_ngram_length_generalization` -- Prop. 3, N-gram recall at longer lengths;
  * :mod:`~mixerzoo.theory.las_kernels` -- LaS Fig. 1, long-convolution kernels decay and are smooth;
  * :mod:`~mixerzoo.theory.las_thm_b1` -- LaS Thm. B.1, one attention head as one SSM channel.

Constructions write their weights into the real ``cat`` / ``landmark_cat`` mixers of a model
from ``build_model`` (:mod:`~mixerzoo.theory.constructed`) and score it with the project's tasks
and ``evaluate_tokens``. Theory experiment files (``studies/configs/*.yaml``: parameters,
presets, the paper's claims) are run by ``mixerzoo study run NAME`` (:mod:`~mixerzoo.studies.computed`).
"""

from __future__ import annotations
