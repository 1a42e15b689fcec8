"""The sweep kind of study: a study file that expands into a grid of task runs (its config,
``--set`` paths, planning, one module per executor, cells, plots, report and cost), and the
:class:`~mixerzoo.studies.sweep.study.SweepStudy` that serves it (MAD's study, in ``mad/``,
builds on it: :class:`~mixerzoo.studies.sweep.study.MadStudy`)."""
