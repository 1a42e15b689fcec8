"""LRA Text (IMDB bytes) and Retrieval (AAN pairs) loaders on files this test writes."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS, build_task


def write_imdb(root, per_class=5):
    """aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt; returns {text bytes: label}."""
    truth = {}
    for part in ("train", "test"):
        for label, cls in enumerate(("neg", "pos")):
            folder = root / "aclImdb" / part / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                text = f"{part} {cls} review {i} caf\u00e9 " + "x" * (3 * i)
                (folder / f"{i}_{8 if label else 3}.txt").write_text(text, encoding="utf-8")
                truth[part, text.encode("utf-8")] = label
    return truth


def decode(tokens, mask):
    """Inverse of the byte encoding: token t (t >= 1) is byte t - 1."""
    return bytes((tokens[mask] - 1).tolist())


def test_imdb_bytes_labels_and_truncation(tmp_path):
    truth = write_imdb(tmp_path)
    task = build_task("lra_text", data_dir=str(tmp_path), seq_len=30, valid_fraction=0.2)
    test = task.make(10, 0, "test")
    assert test.inputs.shape == (10, 30) and task.vocab_size == 257
    expected = {text[:30]: y for (part, text), y in truth.items() if part == "test"}
    got = {decode(x, m): int(y) for x, y, m in zip(test.inputs, test.labels, test.mask)}
    assert got == expected  # every test review once, bytes and label
    for x, m in zip(test.inputs, test.mask):
        assert (x[~m] == 0).all() and m.tolist() == sorted(m.tolist(), reverse=True)  # right padding
    train, valid = task.make(8, 0, "train"), task.make(2, 0, "valid")
    train_texts = {decode(x, m) for x, m in zip(train.inputs, train.mask)}
    valid_texts = {decode(x, m) for x, m in zip(valid.inputs, valid.mask)}
    assert not train_texts & valid_texts and len(train_texts | valid_texts) == 10
    # data_dir may also be the aclImdb folder itself
    same = build_task("lra_text", data_dir=str(tmp_path / "aclImdb"), seq_len=30).make(10, 0, "test")
    assert np.array_equal(np.sort(same.inputs, axis=0), np.sort(test.inputs, axis=0))


def test_imdb_missing_folders(tmp_path):
    write_imdb(tmp_path)
    (tmp_path / "aclImdb" / "test" / "neg").rename(tmp_path / "elsewhere")
    with pytest.raises(ConfigError) as err:
        build_task("lra_text", data_dir=str(tmp_path)).make(2, 0)
    assert "missing folder(s) test/neg in" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="data_dir: not set"):
        build_task("lra_text").make(2, 0)


def write_aan(folder, n=6):
    truth = {}
    for split, suffix in (("train", "train"), ("valid", "eval"), ("test", "test")):
        lines = []
        for i in range(n):
            label = (i + len(split)) % 2
            a, b = f"{split} doc {i} " + "a" * i, f"other {i}\u00fc"
            lines.append(f"{label}.0\tX{i}\tY{i}\t{a}\t{b}")
            truth[split, a.encode(), b.encode()] = label
        (folder / f"new_aan_pairs.{suffix}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return truth


def test_aan_pairs_are_concatenated_with_a_separator(tmp_path):
    truth = write_aan(tmp_path)
    doc_len = 9
    task = build_task("lra_retrieval", data_dir=str(tmp_path), doc_len=doc_len)
    assert (task.seq_len, task.vocab_size) == (19, 258)
    for split in ("train", "valid", "test"):
        d = task.make(6, 1, split)
        got = {}
        for x, y, m in zip(d.inputs, d.labels, d.mask):
            real = x[m]
            sep = int(np.flatnonzero(real == 257)[0])
            assert (real == 257).sum() == 1 and (x[~m] == 0).all()
            got[bytes((real[:sep] - 1).tolist()), bytes((real[sep + 1 :] - 1).tolist())] = int(y)
        expected = {(a[:doc_len], b[:doc_len]): y for (s, a, b), y in truth.items() if s == split}
        assert got == expected


@pytest.mark.parametrize(
    "content, match",
    [
        ("1\tA\tB\tonly four fields\n", "line 1 has 4 tab-separated fields"),
        ("0\tA\tB\tx\ty\nyes\tA\tB\tx\ty\n", "line 2: label b'yes' is not 0 or 1"),
        ("\n\n", "no pairs"),
    ],
)
def test_aan_corrupt_files(tmp_path, content, match):
    write_aan(tmp_path)
    (tmp_path / "new_aan_pairs.train.tsv").write_text(content)
    with pytest.raises(ConfigError, match=match) as err:
        build_task("lra_retrieval", data_dir=str(tmp_path)).make(1, 0)
    assert "new_aan_pairs.train.tsv" in str(err.value)


def test_aan_missing_file_is_named(tmp_path):
    write_aan(tmp_path)
    (tmp_path / "new_aan_pairs.eval.tsv").unlink()
    build_task("lra_retrieval", data_dir=str(tmp_path)).make(2, 0, "test")  # other splits still load
    with pytest.raises(ConfigError) as err:
        build_task("lra_retrieval", data_dir=str(tmp_path)).make(2, 0, "valid")
    assert "missing file(s) new_aan_pairs.eval.tsv in" in str(err.value) and str(tmp_path) in str(err.value)


def test_sample_files_and_model_defaults(tmp_path):
    for name in ("lra_text", "lra_retrieval"):
        params = TASKS.get(name).write_sample_files(tmp_path / name)
        assert len(build_task(name, **params).make(8, 0, "test")) == 8
    cfg = load_run_config(
        {"data": {"task": {"name": "lra_retrieval", "data_dir": str(tmp_path), "doc_len": 50}}, "model": {}}
    )
    assert (cfg.model.head, cfg.model.num_classes, cfg.model.vocab_size, cfg.model.max_len) == (
        "classification",
        2,
        258,
        101,
    )
