"""The results store: one SQLite file per results directory recording every run and attempt
(:mod:`~mixerzoo.store.results`), the config fingerprints that name runs, and the provenance
(code version, machine) written beside each result."""
