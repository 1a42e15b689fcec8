"""The executors of a sweep, one module each, picked by ``studies/sweep/runner.py: run_sweep``:

* ``inline``: one worker, each run trained in the sweep's own process in turn;
* ``local``: N spawned worker processes on this machine (``--workers N``, ``--runs-per-gpu K``);
* ``ray_cluster``: one Ray task per run, on a private local instance or a cluster (``--address``);
* ``base``: what each executor takes and shares: the :class:`~.base.Job` it reports each run's
  outcome to, and reading back the attempt it made for a run.

The runs themselves are trained by ``studies/sweep/workers.py: run_one``, in whichever process.
"""
