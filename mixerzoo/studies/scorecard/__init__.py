"""The scorecard: one command places a sequence mixer among the zoo on recall, copying, in-context
learning, long-range tasks and efficiency, against reference results shipped with the package.

``battery.py`` (which cells of which studies), ``candidate.py`` (the mixer and its state),
``items.py`` (one item run and read), ``efficiency.py`` (throughput and memory against length),
``references.py`` (the shipped results, their provenance and staleness), ``table.py`` (ranks with
ties within noise), ``page.py`` (figures and the HTML page), ``card.py`` (the whole scorecard),
``study.py`` (the study kind ``scorecard``).
"""
