"""Training: one plain loop (``train.py``) and its learning-rate schedules."""

from mixerzoo.training.train import TrainingDiverged, TrainResult, train

__all__ = ["TrainResult", "TrainingDiverged", "train"]
