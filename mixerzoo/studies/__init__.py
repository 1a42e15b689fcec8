"""Studies: every kind of experiment behind one set of verbs (list, show, run, plot, report, check).

A study is a shipped name or a YAML file. :func:`~mixerzoo.studies.dispatch.find_study` decides
which kind serves it; each kind is a sub-package: ``sweep/`` (a grid of task runs), ``mad/``
(MAD's protocol over a sweep), ``computed/`` (a construction, bound or probe study computed in
one run) and ``lm/`` (language-model studies, computed runs that train LMs). ``mixerzoo study
...`` calls only that function and the :class:`~mixerzoo.studies.base.Study` methods.
"""
