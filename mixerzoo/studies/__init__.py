"""Studies: every kind of experiment behind one set of verbs (list, show, run, plot, report, check).

A study is a shipped name or a YAML file. :func:`~mixerzoo.studies.dispatch.find_study` decides
which implementation serves it: a grid sweep or the MAD protocol (``experiments/``), or a
computed result, language-model study or probe study (``theory/``). ``mixerzoo study ...`` calls
only that function and the :class:`~mixerzoo.studies.base.Study` methods.
"""
