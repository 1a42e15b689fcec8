"""The corpus interface: source files -> token-id arrays per split, memory-mapped and cached.

A corpus subclass names the files it reads (``sources``) and turns them into one int array per
split plus a vocabulary (``build``). The base class does the rest:

  * the arrays are written once under a cache directory (``cache_dir``; default
    ``<data_dir>/.mixerzoo-cache``, or ``$MIXERZOO_CACHE`` / ``~/.cache/mixerzoo`` for a corpus
    without a data directory) in an entry keyed by the corpus name, its parameters and each
    source file's size and modification time, so an edited file or new parameters rebuild it;
  * later loads open the arrays with ``np.memmap`` (no copy in memory: text8's 100M tokens
    cost nothing until read);
  * a file that is missing is one error line naming the file and the directory searched.

Vocabulary kinds (``meta["vocab"]["kind"]``): ``chars`` (id = index in a sorted character
list, nanoGPT's shakespeare_char convention), ``bytes`` (id = byte value, 256 ids), ``words``
(id = index in a word list) and ``bpe`` (a ``tokenizers`` BPE model saved beside the arrays).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mixerzoo.params import Params, validate
from mixerzoo.registry import ConfigError

#: bumped when the cache layout or a tokenization changes, so old entries are not read
CACHE_FORMAT = 1
SPLIT_NAMES = ("train", "val", "test")


def cache_root(data_dir: Path | None, cache_dir: str | os.PathLike | None) -> Path:
    """Where a corpus's cache entries live (see the module docstring)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if data_dir is not None:
        return data_dir / ".mixerzoo-cache"
    env = os.environ.get("MIXERZOO_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mixerzoo"


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned dtype that holds ids ``0 .. vocab_size - 1``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dt).max + 1:
            return np.dtype(dt)
    raise ConfigError(f"vocabulary of {vocab_size:,} tokens is too large (at most 2^32)")


def chars_to_ids(text: str, chars: list[str]) -> np.ndarray:
    """Vectorized ``[chars.index(c) for c in text]``; ``chars`` sorted by code point."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    table = np.array([ord(c) for c in chars], dtype=np.uint32)
    ids = np.searchsorted(table, codes)
    bad = (ids >= len(table)) | (table[np.minimum(ids, len(table) - 1)] != codes)
    if bad.any():
        c = chr(int(codes[np.argmax(bad)]))
        raise ConfigError(f"character {c!r} is not in this corpus's vocabulary of {len(chars)} characters")
    return ids.astype(token_dtype(len(chars)))


@contextlib.contextmanager
def entry_lock(path: Path):
    """An exclusive lock on ``path`` across processes (torchrun ranks building one cache entry).

    ``fcntl.flock`` where the platform has it; elsewhere no lock (one process per entry assumed).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Corpus:
    """Base class. Subclasses define ``Params``, ``unit``, ``sources()`` and ``build()``."""

    name: ClassVar[str] = ""
    #: what one token is: "char" and "byte" corpora report bits per character / byte,
    #: "token" corpora (BPE, words) report perplexity
    unit: ClassVar[str] = "char"
    #: whether the corpus reads files from a user's data directory
    needs_data_dir: ClassVar[bool] = True

    class Params(Params):
        pass

    def __init__(self, data_dir: str | os.PathLike | None = None, cache_dir=None, **params: Any) -> None:
        self.p = validate(type(self).Params, params, where=f"corpus[{type(self).name}]")
        self.data_dir = Path(data_dir).expanduser() if data_dir is not None else None
        if self.needs_data_dir:
            if self.data_dir is None:
                raise ConfigError(
                    f"corpus {self.name!r} reads files from a data directory: give --data-dir "
                    f"(or corpus.data_dir) holding {self.expected_files()}"
                )
            if not self.data_dir.is_dir():
                raise ConfigError(
                    f"corpus {self.name!r}: data directory {str(self.data_dir)!r} does not exist"
                )
        self.cache_dir = cache_dir
        self.splits: dict[str, np.ndarray] = {}
        self.meta: dict[str, Any] = {}
        self.cache_path: Path | None = None
        self._tokenizer = None

    # -- to override -------------------------------------------------------------------
    def expected_files(self) -> str:
        """How to describe the files this corpus reads, for error messages."""
        return "its files"

    def sources(self) -> list[Path]:
        """The files the arrays are built from (their size and mtime key the cache)."""
        return []

    def build(self, workdir: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:  # pragma: no cover
        """Token arrays per split and the vocabulary meta; ``workdir`` may receive extra files."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def find(self, *names: str) -> Path:
        """The first of ``names`` present in the data directory; else one line naming them and it."""
        assert self.data_dir is not None
        for n in names:
            if (self.data_dir / n).is_file():
                return self.data_dir / n
        wanted = " or ".join(repr(n) for n in names)
        raise ConfigError(
            f"corpus {self.name!r}: file {wanted} not found in data directory {str(self.data_dir)!r}"
        )

    def cache_key(self) -> str:
        files = []
        for path in self.sources():
            st = path.stat()
            files.append([path.name, st.st_size, st.st_mtime_ns])
        spec = {"format": CACHE_FORMAT, "corpus": self.name, "params": self.p.model_dump(), "files": files}
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def load(self) -> Corpus:
        """Open the cached arrays, building them first when no valid cache entry exists."""
        root = cache_root(self.data_dir, self.cache_dir)
        entry = root / f"{self.name}-{self.cache_key()}"
        if not self._valid_entry(entry):
            self._build_entry(root, entry)
        self.cache_path = entry
        self.meta = json.loads((entry / "meta.json").read_text())
        dtype = np.dtype(self.meta["dtype"])
        self.splits = {}
        for split, n in self.meta["lengths"].items():
            path = entry / f"{split}.bin"
            empty = np.zeros(0, dtype)
            self.splits[split] = np.memmap(path, dtype=dtype, mode="r", shape=(n,)) if n else empty
        return self

    def _valid_entry(self, entry: Path) -> bool:
        try:
            meta = json.loads((entry / "meta.json").read_text())
            dtype = np.dtype(meta["dtype"])
            return all(
                (entry / f"{s}.bin").stat().st_size == n * dtype.itemsize for s, n in meta["lengths"].items()
            )
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def _build_entry(self, root: Path, entry: Path) -> None:
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"corpus {self.name!r}: cannot create cache directory {str(root)!r}: {err}"
            ) from None
        with entry_lock(root / f".lock-{entry.name}"):
            if not self._valid_entry(entry):  # another process (a torchrun rank) may have built it
                self._write_entry(root, entry)

    def _write_entry(self, root: Path, entry: Path) -> None:
        """Build into a private folder, then rename it into place (called with the entry's lock held)."""
        tmp = root / f".tmp-{entry.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            arrays, vocab = self.build(tmp)
            size = int(vocab["size"])
            dtype = token_dtype(size)
            lengths = {}
            for split, arr in arrays.items():
                arr = np.asarray(arr)
                if arr.size and int(arr.max()) >= size:
                    raise ConfigError(f"corpus {self.name!r}: token id {int(arr.max())} >= vocab size {size}")
                arr.astype(dtype, copy=False).tofile(tmp / f"{split}.bin")
                lengths[split] = int(arr.size)
            meta = {"corpus": self.name, "params": self.p.model_dump(), "unit": self.unit}
            meta.update({"dtype": dtype.name, "lengths": lengths, "vocab": vocab})
            (tmp / "meta.json").write_text(json.dumps(meta))
            if entry.exists():  # a stale or broken entry (a valid one is never removed)
                shutil.rmtree(entry, ignore_errors=True)
            tmp.rename(entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- vocabulary --------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab"]["size"])

    def _bpe(self):
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            assert self.cache_path is not None
            self._tokenizer = Tokenizer.from_file(str(self.cache_path / "tokenizer.json"))
        return self._tokenizer

    def encode(self, text: str) -> np.ndarray:
        """Text -> token ids (the corpus's own tokenization)."""
        vocab = self.meta["vocab"]
        kind = vocab["kind"]
        if kind == "chars":
            return chars_to_ids(text, vocab["chars"])
        if kind == "bytes":
            return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()
        if kind == "words":
            index = {w: i for i, w in enumerate(vocab["words"])}
            unk = index.get(vocab.get("unk", ""), None)
            out = []
            for w in text.split():
                if w not in index and unk is None:
                    raise ConfigError(f"word {w!r} is not in this corpus's vocabulary")
                out.append(index.get(w, unk))
            return np.array(out, dtype=token_dtype(self.vocab_size))
        return np.array(self._bpe().encode(text).ids, dtype=token_dtype(self.vocab_size))

    def decode(self, ids) -> str:
        """Token ids -> text."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        vocab = self.meta["vocab"]
        kind = vocab["kind"]
        if kind == "chars":
            chars = vocab["chars"]
            return "".join(chars[i] for i in ids)
        if kind == "bytes":
            return bytes(ids).decode("utf-8", errors="replace")
        if kind == "words":
            words = vocab["words"]
            return " ".join(words[i] for i in ids)
        return self._bpe().decode(ids, skip_special_tokens=False)

    def describe(self) -> str:
        lengths = ", ".join(f"{k} {len(v):,}" for k, v in self.splits.items())
        return f"{self.name}: vocab {self.vocab_size:,} ({self.unit} level), tokens {lengths}"


def read_text(path: Path, what: str) -> str:
    """A file's UTF-8 text; a file that is not UTF-8 is one error line."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{what} {str(path)!r} is not UTF-8 text: {err.reason} at byte {err.start}"
        ) from None


def char_corpus_arrays(text: str, val_fraction: float) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """nanoGPT's data/shakespeare_char/prepare.py: vocab = sorted set of chars, first 90% train."""
    if not text:
        raise ConfigError("the text is empty")
    chars = sorted(set(text))
    ids = chars_to_ids(text, chars)
    n = len(ids)
    cut = int(n * (1.0 - val_fraction))
    return {"train": ids[:cut], "val": ids[cut:]}, {"kind": "chars", "size": len(chars), "chars": chars}


def validate_split_sizes(name: str, total: int, sizes: dict[str, int]) -> None:
    need = sum(sizes.values())
    if total < need:
        parts = " + ".join(f"{k} {v:,}" for k, v in sizes.items())
        raise ConfigError(
            f"corpus {name!r}: the file holds {total:,} bytes, fewer than the splits need ({parts}); "
            "lower the split sizes (corpus params n_train / n_val / n_test)"
        )


def read_bytes_maybe_zip(path: Path, member: str) -> np.ndarray:
    """The bytes of ``path``, or of ``member`` inside it when it is a .zip (text8.zip, enwik8.zip)."""
    if path.suffix != ".zip":
        return np.fromfile(path, dtype=np.uint8)
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            name = member if member in names else (names[0] if len(names) == 1 else None)
            if name is None:
                held = ", ".join(names[:5])
                raise ConfigError(f"{str(path)!r} does not contain {member!r} (it holds {held})")
            return np.frombuffer(zf.read(name), dtype=np.uint8)
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as err:
        raise ConfigError(f"{str(path)!r} is not a readable zip archive ({err})") from None


def standard_splits(
    name: str, data: np.ndarray, n_train: int, n_val: int, n_test: int
) -> dict[str, np.ndarray]:
    """The first n_train tokens train, the next n_val val, the next n_test test (90M/5M/5M)."""
    validate_split_sizes(name, data.size, {"train": n_train, "val": n_val, "test": n_test})
    return {
        "train": data[:n_train],
        "val": data[n_train : n_train + n_val],
        "test": data[n_train + n_val : n_train + n_val + n_test],
    }
