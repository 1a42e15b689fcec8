"""sMNIST / pMNIST / sCIFAR loaders on small files this test writes in the standard formats; digits8x8."""

from __future__ import annotations

import csv
import gzip
import pickle
import struct

import numpy as np
import pytest

from mixerzoo.cli.main import main
from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS, build_task


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX: 0x00 0x00, type 0x08 (unsigned byte), ndim, then big-endian uint32 dims, then data."""
    return (
        struct.pack(">BBBB", 0, 0, 8, array.ndim)
        + struct.pack(f">{array.ndim}I", *array.shape)
        + array.tobytes()
    )


def write_mnist(folder, n_train=30, n_test=12, gz=False, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        for suffix, arr in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels)):
            data = idx_bytes(arr)
            name = f"{prefix}-{suffix}" + (".gz" if gz else "")
            (folder / name).write_bytes(gzip.compress(data) if gz else data)
        arrays[prefix] = (images, labels)
    return arrays


def rows_of(images):
    return {tuple(r) for r in images.reshape(len(images), -1).tolist()}


@pytest.mark.parametrize("gz", [False, True])
def test_smnist_reads_idx_files_row_major(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    task = build_task("smnist", data_dir=str(tmp_path), valid_fraction=0.2)
    test = task.make(12, seed=0, split="test")  # the whole test file, in some order
    assert test.inputs.shape == (12, 784) and test.mask.all()
    images, labels = arrays["t10k"]
    expected = {tuple(x.reshape(-1).tolist()): int(y) for x, y in zip(images, labels)}
    assert {tuple(x.tolist()): int(y) for x, y in zip(test.inputs, test.labels)} == expected
    # train / valid: the first 24 and the last 6 training images
    train_images = arrays["train"][0]
    train, valid = task.make(24, 1, "train"), task.make(6, 1, "valid")
    assert rows_of(train.inputs) == rows_of(train_images[:24])
    assert rows_of(valid.inputs) == rows_of(train_images[24:])
    with pytest.raises(ConfigError, match="n = 25 examples asked of split 'train', which holds 24"):
        task.make(25, 0)


def test_pmnist_is_one_fixed_permutation(tmp_path):
    write_mnist(tmp_path)
    plain = build_task("smnist", data_dir=str(tmp_path)).make(10, 3)
    perm_task = build_task("pmnist", data_dir=str(tmp_path), permutation_seed=5)
    permuted = perm_task.make(10, 3)
    assert np.array_equal(plain.labels, permuted.labels)
    # the documented permutation (numpy's default_rng(permutation_seed)) maps every image
    perm = np.random.default_rng(5).permutation(784)
    assert np.array_equal(permuted.inputs, plain.inputs[:, perm])
    assert sorted(perm.tolist()) == list(range(784)) and not np.array_equal(perm, np.arange(784))
    other = build_task("pmnist", data_dir=str(tmp_path), permutation_seed=6).make(10, 3)
    assert not np.array_equal(other.inputs, permuted.inputs)


def write_cifar(folder, per_batch=4, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=per_batch).tolist()
        with open(folder / name, "wb") as fh:
            pickle.dump({b"batch_label": b"x", b"data": data, b"labels": labels}, fh, protocol=2)
        out[name] = (data, labels)
    return out


def test_scifar_is_grayscale_as_lra(tmp_path):
    sub = tmp_path / "cifar-10-batches-py"
    sub.mkdir()
    batches = write_cifar(sub)
    task = build_task("scifar", data_dir=str(tmp_path), valid_fraction=0)
    test = task.make(4, 0, "test")
    assert test.inputs.shape == (4, 1024) and task.vocab_size == 256
    data, labels = batches["test_batch"]
    r, g, b = (data[:, i * 1024 : (i + 1) * 1024].astype(float) for i in range(3))
    gray = np.rint(0.2989 * r + 0.5870 * g + 0.1140 * b).astype(int)  # tf.image.rgb_to_grayscale
    expected = {tuple(x.tolist()): y for x, y in zip(gray, labels)}
    assert {tuple(x.tolist()): int(y) for x, y in zip(test.inputs, test.labels)} == expected
    assert len(task.make(20, 0, "train")) == 20  # five batches of four


def test_missing_files_are_named_in_one_line(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ConfigError) as err:
        build_task("smnist", data_dir=str(tmp_path)).make(2, 0, "test")
    message = str(err.value)
    assert "t10k-labels-idx1-ubyte" in message and str(tmp_path) in message and "\n" not in message
    assert "missing file(s) t10k-labels-idx1-ubyte or t10k-labels-idx1-ubyte.gz in" in message
    assert "t10k-images" not in message  # only what is missing
    with pytest.raises(ConfigError, match="missing file.s. data_batch_1, data_batch_2, .*data_batch_5 in"):
        build_task("scifar", data_dir=str(tmp_path)).make(2, 0)
    with pytest.raises(ConfigError, match="data_dir: not set"):
        build_task("smnist").make(2, 0)
    with pytest.raises(ConfigError, match="no such folder"):
        build_task("scifar", data_dir=str(tmp_path / "nope")).make(2, 0)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda p: p.write_bytes(b"\x00\x00\x08\x01" + b"junk"), "IDX header"),
        (lambda p: p.write_bytes(idx_bytes(np.zeros((5, 28, 28), np.uint8))[:-10]), "holds"),
        (lambda p: p.write_bytes(b""), "empty"),
    ],
)
def test_corrupt_idx_files_give_a_clear_error(tmp_path, damage, match):
    write_mnist(tmp_path)
    damage(tmp_path / "train-images-idx3-ubyte")
    with pytest.raises(ConfigError, match=match) as err:
        build_task("smnist", data_dir=str(tmp_path)).make(2, 0)
    assert "train-images-idx3-ubyte" in str(err.value) and "\n" not in str(err.value)


def test_corrupt_gzip_and_cifar_pickles(tmp_path):
    write_mnist(tmp_path, gz=True)
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(ConfigError, match="corrupt or truncated"):
        build_task("smnist", data_dir=str(tmp_path)).make(2, 0, "test")
    write_cifar(tmp_path)
    (tmp_path / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match="test_batch is not a valid file"):
        build_task("scifar", data_dir=str(tmp_path)).make(2, 0, "test")
    # a pickle that would call os.system is refused, not run
    (tmp_path / "test_batch").write_bytes(b"cos\nsystem\n(S'echo pwned'\ntR.")
    with pytest.raises(ConfigError, match="refusing to load os.system|posix.system"):
        build_task("scifar", data_dir=str(tmp_path)).make(2, 0, "test")


def test_digits8x8_reads_sklearn_bundled_data():
    from mixerzoo.tasks.sequential_images import sklearn_digits_file

    path = sklearn_digits_file()
    if path is None:
        pytest.skip("scikit-learn is not installed")
    with gzip.open(path, "rt") as fh:  # parsed here with the csv module, not the task's reader
        table = [[int(float(v)) for v in row] for row in csv.reader(fh)]
    lookup = {tuple(row[:64]): row[64] for row in table}
    assert len(table) == 1797
    task = build_task("digits8x8")
    assert (task.vocab_size, task.seq_len) == (17, 64)
    seen = {}
    for split, size in (("train", 1258), ("valid", 180), ("test", 359)):
        d = task.make(size, 0, split)
        seen[split] = rows_of(d.inputs)
        assert all(lookup[tuple(x.tolist())] == y for x, y in zip(d.inputs, d.labels))
    assert not (seen["train"] & seen["test"]) and not (seen["valid"] & seen["test"])
    assert len(seen["train"] | seen["valid"] | seen["test"]) == len(lookup)


def test_sample_files_written_by_the_tasks_load(tmp_path):
    for name in ("smnist", "pmnist", "scifar"):
        params = TASKS.get(name).write_sample_files(tmp_path / name)
        d = build_task(name, **params).make(8, 0, "test")
        assert len(d) == 8 and set(d.labels.tolist()) <= set(range(10))


def test_images_imply_a_classifier_and_the_cli_writes_them(tmp_path):
    write_mnist(tmp_path)
    cfg = load_run_config({"data": {"task": {"name": "smnist", "data_dir": str(tmp_path)}}, "model": {}})
    assert (cfg.model.head, cfg.model.num_classes, cfg.model.vocab_size, cfg.model.max_len) == (
        "classification",
        10,
        256,
        784,
    )
    out = tmp_path / "x.npz"
    main(["data", "pmnist", "--n", "5", "--set", f"data_dir={tmp_path}", "--out", str(out)])
    assert np.load(out)["inputs"].shape == (5, 784)


def test_cifar_batches_pickled_by_old_numpy_load(tmp_path):
    """The distributed batches name numpy.core.multiarray (numpy 1.x); numpy 2 moved it to numpy._core."""
    data = np.arange(2 * 3072, dtype=np.int64).reshape(2, 3072).astype(np.uint8)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        raw = pickle.dumps({b"data": data, b"labels": [3, 4]}, protocol=2)
        (tmp_path / name).write_bytes(raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    d = build_task("scifar", data_dir=str(tmp_path)).make(2, 0, "test")
    assert sorted(d.labels.tolist()) == [3, 4] and d.inputs.shape == (2, 1024)
