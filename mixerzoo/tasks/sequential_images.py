"""Sequential image classification: sMNIST, pMNIST, sCIFAR (LRA Image) and the bundled 8x8 digits.

LaS Table 3 (sMNIST, pMNIST) and Table 2 (LRA "Image" = sCIFAR in grayscale). An image is
read pixel by pixel in row-major order; each pixel's intensity is a token (vocabulary 256 for
8-bit images) and the class of the image (10 classes) is predicted from the whole sequence.

* ``smnist``: MNIST, 28x28 -> length 784.
* ``pmnist``: MNIST with the pixels of every image reordered by one fixed permutation of the 784
  positions, drawn from ``permutation_seed`` (the same for every split and run seed), as in Le et
  al. 2015; it removes the locality that a row-major scan keeps.
* ``scifar``: CIFAR-10, 32x32 RGB -> grayscale -> length 1024. Grayscale as LRA Image does it
  (``tf.image.rgb_to_grayscale``: ``0.2989 R + 0.5870 G + 0.1140 B``, rounded back to 0..255).
* ``digits8x8``: the 1,797 8x8 handwritten digits (UCI "Optical Recognition of Handwritten
  Digits", intensities 0..16, length 64) that scikit-learn ships inside its package; read
  straight from its installed data file (``sklearn/datasets/data/digits.csv.gz``) without
  importing scikit-learn. Real data small enough for a CPU quick preset.

Files (``data_dir``, the standard distributions, nothing is downloaded):
  MNIST: ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
  ``t10k-labels-idx1-ubyte``, each optionally ``.gz``, in ``data_dir`` or ``data_dir/MNIST/raw``.
  CIFAR-10: the python batches ``data_batch_1`` .. ``data_batch_5`` and ``test_batch`` in
  ``data_dir`` or ``data_dir/cifar-10-batches-py``. A batch is a pickle; it is read with an
  unpickler that only admits numpy arrays, lists and dicts (a pickle can run code otherwise).

Splits: ``test`` is the official test file; ``valid`` is the last ``valid_fraction`` of the
training file (LRA Image: ``train[90%:]``) and ``train`` the rest. ``make(n, seed, split)``
draws ``n`` distinct images of the split, a subset chosen by the seed.

Worked example (``smnist``): an image of a 7 whose first row is blank and whose second row
starts ``0 0 0 84 185 ...`` gives ``inputs = [0 x 28, 0, 0, 0, 84, 185, ...]`` (784 tokens),
``labels = 7``, ``mask`` all true.
"""

from __future__ import annotations

import importlib.util
import io
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData
from mixerzoo.tasks.data_files import choose_rows, corrupt, data_folder, hold_out, locate, read_file_bytes

MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST = ("test_batch",)
#: ITU-R 601 luma weights, as tf.image.rgb_to_grayscale (LRA Image's preprocessing)
GRAY_WEIGHTS = np.array([0.2989, 0.5870, 0.1140])


def read_idx(task: str, path: Path, ndim: int) -> np.ndarray:
    """An unsigned-byte IDX array (LeCun's MNIST format) with ``ndim`` dimensions.

    Layout: two zero bytes, type code 0x08 (ubyte), the number of dimensions, then one big-endian
    uint32 per dimension, then the data.
    """
    raw = read_file_bytes(task, path)
    if len(raw) < 4 + 4 * ndim or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != ndim:
        head = raw[:4].hex() if raw else "empty"
        raise corrupt(task, path, f"expected an IDX header 0000080{ndim} (ubyte, {ndim}-d), found {head}")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    size = int(np.prod(dims))
    body = len(raw) - 4 - 4 * ndim
    if body != size:
        raise corrupt(
            task, path, f"header says shape {dims} ({size:,} bytes) but the data holds {body:,} bytes"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays, dicts, lists, strings and numbers; refuses every other global."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def read_cifar_batch(task: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 ``[m, 3072]`` rows of 1024 R, 1024 G, 1024 B values, int64 ``[m]`` labels)."""
    raw = read_file_bytes(task, path)
    try:
        batch = _ArraysOnly(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a corrupt file
        raise corrupt(
            task, path, f"not a CIFAR-10 python batch pickle ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(batch, dict):
        raise corrupt(task, path, f"a CIFAR-10 batch is a dict, found {type(batch).__name__}")
    data, labels = batch.get(b"data", batch.get("data")), batch.get(b"labels", batch.get("labels"))
    if data is None or labels is None:
        raise corrupt(task, path, "a CIFAR-10 batch holds 'data' and 'labels'")
    data = np.asarray(data)
    labels = np.asarray(labels, dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
        raise corrupt(
            task,
            path,
            f"'data' must be uint8 [m, 3072] with m labels; found {data.dtype} {list(data.shape)} "
            f"and {len(labels)} labels",
        )
    return data, labels


def to_grayscale(rgb_rows: np.ndarray) -> np.ndarray:
    """CIFAR rows ``[m, 3072]`` (channel-major) -> ``[m, 1024]`` uint8 gray, as LRA Image."""
    planes = rgb_rows.reshape(-1, 3, 1024).astype(np.float64)
    gray = np.einsum("mcp,c->mp", planes, GRAY_WEIGHTS)
    return np.clip(np.rint(gray), 0, 255).astype(np.uint8)


def check_labels(task: str, path: Path, labels: np.ndarray, num_classes: int) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise corrupt(
            task, path, f"labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}"
        )


class ImageSequenceTask(Task):
    """Shared parts: read a file set once per split, serve seeded subsets of it as token sequences."""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 10
    image_side: ClassVar[int] = 28
    levels: ClassVar[int] = 256
    #: what ``data_dir`` must hold, for error messages
    files_hint: ClassVar[str] = ""

    class Params(Task.Params):
        data_dir: str | None = Field(None, description="folder holding the standard data set files")
        valid_fraction: float = Field(
            0.1, ge=0, lt=1, description="share of the training file held out as split 'valid'"
        )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._files: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def vocab_size(self) -> int:
        return self.levels

    @property
    def seq_len(self) -> int:
        return self.image_side**2

    def model_defaults(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "max_len": self.seq_len,
            "head": "classification",
            "num_classes": self.num_classes,
        }

    # -- to override -------------------------------------------------------------------
    def load(self, part: str) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        """``part`` ('train' or 'test' file set) -> (uint8 ``[m, seq_len]`` pixels, int64 ``[m]``)."""
        raise NotImplementedError

    def reorder(self, pixels: np.ndarray) -> np.ndarray:
        """Positions in the order the model reads them (row-major unless overridden)."""
        return pixels

    # -- shared ------------------------------------------------------------------------
    def split_rows(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        part = "test" if split == "test" else "train"
        if part not in self._files:
            self._files[part] = self.load(part)
        pixels, labels = self._files[part]
        if part == "train":
            rows = hold_out(len(labels), self.p.valid_fraction, split)
            pixels, labels = pixels[rows], labels[rows]
        return pixels, labels

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        pixels, labels = self.split_rows(split)
        rows = choose_rows(type(self).name, split, len(labels), n, rng)
        inputs = self.reorder(pixels[rows].astype(np.int64))
        return TaskData(inputs, labels[rows].astype(np.int64), mask=np.ones(inputs.shape, dtype=bool))

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        """``n`` examples of the training split."""
        return self.generate_split(n, rng, "train")


@TASKS.register("smnist")
class SequentialMNIST(ImageSequenceTask):
    """MNIST read pixel by pixel (784 tokens), 10-way classification (LaS Table 3)."""

    files_hint: ClassVar[str] = (
        "the MNIST IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each optionally .gz)"
    )

    def load(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        name = type(self).name
        folder = data_folder(name, self.p.data_dir, self.files_hint)
        images_name, labels_name = MNIST_FILES[part]
        found = locate(
            name,
            [folder, folder / "MNIST" / "raw"],
            {
                "images": (images_name, images_name + ".gz"),
                "labels": (labels_name, labels_name + ".gz"),
            },
            "set data_dir to the folder holding the MNIST IDX files",
        )
        images = read_idx(name, found["images"], 3)
        labels = read_idx(name, found["labels"], 1).astype(np.int64)
        if images.shape[1:] != (28, 28):
            raise corrupt(name, found["images"], f"MNIST images are 28x28, found {images.shape[1:]}")
        if len(images) != len(labels):
            raise corrupt(
                name,
                found["labels"],
                f"{len(labels):,} labels for {len(images):,} images in {found['images']}",
            )
        check_labels(name, found["labels"], labels, self.num_classes)
        return images.reshape(len(images), -1), labels

    @staticmethod
    def write_sample_files(directory: str | Path, n: int = 200, seed: int = 0) -> dict[str, Any]:
        """Synthetic files in MNIST's format in ``directory`` (see :func:`write_mnist_sample`)."""
        return write_mnist_sample(directory, n, seed)


@TASKS.register("pmnist")
class PermutedMNIST(SequentialMNIST):
    """MNIST with one fixed, seeded permutation of the 784 pixel positions (LaS Table 3)."""

    class Params(SequentialMNIST.Params):
        permutation_seed: int = Field(
            0, ge=0, description="seed of the fixed pixel permutation (shared by all splits and run seeds)"
        )

    @property
    def permutation(self) -> np.ndarray:
        return np.random.default_rng(self.p.permutation_seed).permutation(self.seq_len)

    def reorder(self, pixels: np.ndarray) -> np.ndarray:
        return pixels[:, self.permutation]


@TASKS.register("scifar")
class SequentialCIFAR(ImageSequenceTask):
    """Grayscale CIFAR-10 read pixel by pixel (1024 tokens): LRA "Image" (LaS Table 2)."""

    image_side: ClassVar[int] = 32
    files_hint: ClassVar[str] = "the CIFAR-10 python batches data_batch_1 .. data_batch_5 and test_batch"

    def load(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        name = type(self).name
        folder = data_folder(name, self.p.data_dir, self.files_hint)
        files = CIFAR_TEST if part == "test" else CIFAR_TRAIN
        found = locate(
            name,
            [folder, folder / "cifar-10-batches-py"],
            {f: (f,) for f in files},
            "set data_dir to the folder holding the CIFAR-10 python batches",
        )
        rows, labels = [], []
        for f in files:
            data, y = read_cifar_batch(name, found[f])
            check_labels(name, found[f], y, self.num_classes)
            rows.append(data)
            labels.append(y)
        return to_grayscale(np.concatenate(rows)), np.concatenate(labels)

    @staticmethod
    def write_sample_files(directory: str | Path, n: int = 40, seed: int = 0) -> dict[str, Any]:
        """Synthetic files in CIFAR-10's format in ``directory`` (see :func:`write_cifar_sample`)."""
        return write_cifar_sample(directory, n, seed)


def sklearn_digits_file() -> Path | None:
    """Path of scikit-learn's bundled ``digits.csv.gz``, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def read_digits_csv(task: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits file: one row per image, 64 intensities 0..16 then the class."""
    text = read_file_bytes(task, path).decode("ascii", errors="replace")
    try:
        table = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)
    except ValueError as err:
        raise corrupt(task, path, f"expected comma-separated numbers ({err})") from None
    if table.shape[1] != 65 or table.min() < 0 or table[:, :64].max() > 16 or table[:, 64].max() > 9:
        raise corrupt(
            task, path, f"expected rows of 64 values in 0..16 and a class 0..9, found {table.shape}"
        )
    return table[:, :64].astype(np.uint8), table[:, 64].astype(np.int64)


#: digits8x8 splits: shares of one fixed permutation of the 1,797 images (disjoint for every seed)
DIGITS_SPLITS = {"train": (0.0, 0.7), "valid": (0.7, 0.8), "test": (0.8, 1.0)}


@TASKS.register("digits8x8")
class Digits8x8(ImageSequenceTask):
    """The 8x8 digits scikit-learn ships (64 tokens of 17 intensity levels): a real CPU-sized set."""

    image_side: ClassVar[int] = 8
    levels: ClassVar[int] = 17

    class Params(Task.Params):
        pass

    def load(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        path = sklearn_digits_file()
        if path is None:
            raise ConfigError(
                "task[digits8x8]: reads the 8x8 digits scikit-learn ships (sklearn/datasets/data/"
                "digits.csv.gz); install it: pip install 'mixerzoo[lra]' (or scikit-learn)"
            )
        return read_digits_csv("digits8x8", path)

    def split_rows(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        if "all" not in self._files:
            self._files["all"] = self.load("all")
        pixels, labels = self._files["all"]
        order = np.random.default_rng(0).permutation(len(labels))
        lo, hi = DIGITS_SPLITS[split]
        rows = order[int(round(lo * len(order))) : int(round(hi * len(order)))]
        return pixels[rows], labels[rows]


# -- sample files in the standard formats (registry-wide smoke tests, a look at the layout) ------
def _sample_images(
    rng: np.random.Generator, n: int, side: int, classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Noise images whose brightness encodes the class, so a model can learn them."""
    labels = np.arange(n) % classes
    noise = rng.integers(0, 40, size=(n, side, side))
    return np.clip(noise + labels[:, None, None] * 20, 0, 255).astype(np.uint8), labels.astype(np.uint8)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array in IDX format (header 0x0000 08 ndim, big-endian dims, bytes)."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist_sample(directory: str | Path, n: int = 200, seed: int = 0) -> dict[str, Any]:
    """Synthetic MNIST-format files (n training, n // 2 test images) in ``directory``; its task params."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for part, m in (("train", n), ("test", max(n // 2, 1))):
        images, labels = _sample_images(rng, m, 28, 10)
        write_idx(folder / MNIST_FILES[part][0], images)
        write_idx(folder / MNIST_FILES[part][1], labels)
    return {"data_dir": str(folder)}


def write_cifar_sample(directory: str | Path, n: int = 40, seed: int = 0) -> dict[str, Any]:
    """Synthetic CIFAR-10 python batches (5 x n training, n test images) in ``directory``; its params."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for f in CIFAR_TRAIN + CIFAR_TEST:
        images, labels = _sample_images(rng, n, 32, 10)
        rgb = np.repeat(images.reshape(n, 1, 1024), 3, axis=1).reshape(n, 3072)
        with open(folder / f, "wb") as fh:
            pickle.dump({b"data": rgb, b"labels": labels.astype(int).tolist()}, fh)
    return {"data_dir": str(folder)}
