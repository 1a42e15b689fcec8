"""Experiments: runs, the results store, sweeps, figures and reports."""
