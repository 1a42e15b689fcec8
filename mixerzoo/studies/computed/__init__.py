"""The computed kinds of study (``computed``, ``lm``, ``probe``): one run that computes a result
(a construction, a bound, trained language models, probes) from a study file of its own format
(:mod:`~mixerzoo.studies.computed.files`), recorded in the store like any run."""
