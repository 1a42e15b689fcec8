from mixerzoo.evaluation.learning_curves import (
    learning_curve,
    steps_to_accuracy,
    wall_to_accuracy,
)


def record(step, acc, wall=None, **extra):
    return {
        "step": step,
        "epoch": step // 100,
        "wall_s": wall if wall is not None else step / 10,
        "accuracy_per_query": acc,
        **extra,
    }


HISTORY = [record(100, 0.02), record(200, 0.40), record(300, 0.991), record(400, 0.97), record(500, 1.0)]


def test_steps_to_accuracy_is_the_first_evaluation_at_or_above_the_threshold():
    # by hand: 0.991 at step 300 is the first >= 0.99; the later dip to 0.97 does not move it
    assert steps_to_accuracy(HISTORY, 0.99) == 300
    assert steps_to_accuracy(HISTORY, 0.40) == 200  # the threshold itself counts as reached
    assert steps_to_accuracy(HISTORY, 0.995) == 500
    assert wall_to_accuracy(HISTORY, 0.99) == 30.0


def test_a_threshold_never_reached_gives_none():
    assert steps_to_accuracy(HISTORY, 1.01) is None
    assert wall_to_accuracy(HISTORY, 1.01) is None
    assert steps_to_accuracy([], 0.5) is None


def test_history_order_and_other_metrics():
    shuffled = [HISTORY[4], HISTORY[2], HISTORY[0], HISTORY[3], HISTORY[1]]
    assert steps_to_accuracy(shuffled, 0.99) == 300
    assert learning_curve(shuffled) == ([100, 200, 300, 400, 500], [0.02, 0.40, 0.991, 0.97, 1.0])
    other = [record(100, 0.9, accuracy_per_example=0.1), record(200, 0.99, accuracy_per_example=0.95)]
    assert steps_to_accuracy(other, 0.9, metric="accuracy_per_example") == 200
    # records that do not report the metric (e.g. a regression run's r2) are skipped
    assert learning_curve([{"step": 1, "r2": 0.5}, record(2, 0.3)]) == ([2], [0.3])
