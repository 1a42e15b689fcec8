"""Analyses of in-context language learners (ICLL, Sec. 5, Figs. 3-6, App. E).

* :mod:`~mixerzoo.analysis.pairwise_tvd`: total variation distance between every pair of
  predictors (models and baselines) over the first 100 tokens of each test instance, and its
  heat-map (Fig. 5);
* :mod:`~mixerzoo.analysis.probes`: n-gram count / frequency / existence probes and DFA-state
  equivalence probes on per-layer hidden states, linear and MLP (Figs. 4, 6; App. E);
* :mod:`~mixerzoo.analysis.model_internals`: per-layer hidden states and attention maps of a
  trained model, and the attention-map figure (Fig. 3).
"""
