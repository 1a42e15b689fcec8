"""The ``pile`` corpus: JSONL shards in the Pile's layout, documents joined by end-of-text, a BPE
trained or loaded, the training split capped, a compressed shard without zstandard one line."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from mixerzoo.corpora import load_corpus
from mixerzoo.corpora.bpe import EOT
from mixerzoo.registry import ConfigError

DOCS = {
    "train/00.jsonl": ["Hakuna Matata means no worries.", "It means no worries for the rest of your days."],
    "val.jsonl": ["Hakuna Matata, what a wonderful phrase."],
    "test.jsonl": ["It is our problem-free philosophy.", "Hakuna Matata!"],
}
SMALL = {
    "train_files": ["train/00.jsonl"],
    "val_file": "val.jsonl",
    "test_file": "test.jsonl",
    "vocab_size": 300,
}


def write_shards(root, docs=DOCS) -> None:
    for name, texts in docs.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(json.dumps({"text": t, "meta": {"pile_set_name": "Pile-CC"}}) + "\n" for t in texts)
        )


def test_splits_are_the_shards_documents_joined_by_end_of_text(tmp_path):
    write_shards(tmp_path)
    c = load_corpus("pile", data_dir=tmp_path, **SMALL)
    assert set(c.splits) == {"train", "val", "test"} and c.unit == "token"
    eot = c.encode(EOT)
    assert len(eot) == 1
    test = np.asarray(c.splits["test"])
    assert int((test == eot[0]).sum()) == 1  # two documents, one separator
    assert c.decode(test) == EOT.join(DOCS["test.jsonl"])
    assert c.decode(c.splits["val"]) == DOCS["val.jsonl"][0]


def test_the_training_split_is_capped_and_a_tokenizer_file_is_used(tmp_path):
    write_shards(tmp_path)
    first = load_corpus("pile", data_dir=tmp_path, **SMALL)
    (tmp_path / "tok.json").write_bytes((first.cache_path / "tokenizer.json").read_bytes())
    capped = load_corpus("pile", data_dir=tmp_path, **SMALL, tokenizer_file="tok.json", max_train_tokens=5)
    assert len(capped.splits["train"]) == 5
    assert np.array_equal(capped.splits["train"], first.splits["train"][:5])


def test_a_compressed_shard_is_found_and_needs_zstandard(tmp_path, monkeypatch):
    write_shards(tmp_path)
    (tmp_path / "val.jsonl.zst").write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    with pytest.raises(ConfigError, match="zstandard") as err:
        load_corpus("pile", data_dir=tmp_path, **{**SMALL, "val_file": "val.jsonl.zst"})
    assert "\n" not in str(err.value)
    (tmp_path / "val.jsonl.zst").unlink()  # the decompressed shard stands in for it
    c = load_corpus("pile", data_dir=tmp_path, **{**SMALL, "val_file": "val.jsonl.zst"})
    assert c.decode(c.splits["val"]) == DOCS["val.jsonl"][0]


@pytest.mark.parametrize(
    "line,needle", [("{not json", "line 1 is not valid JSON"), ('{"body": "x"}', "no string field 'text'")]
)
def test_a_bad_line_is_one_line_naming_the_file(tmp_path, line, needle):
    write_shards(tmp_path)
    (tmp_path / "val.jsonl").write_text(line + "\n")
    with pytest.raises(ConfigError, match=needle) as err:
        load_corpus("pile", data_dir=tmp_path, **SMALL)
    assert "val.jsonl" in str(err.value) and "\n" not in str(err.value)


def test_a_missing_shard_names_both_forms(tmp_path):
    write_shards(tmp_path)
    with pytest.raises(ConfigError, match=r"'train/01.jsonl.zst' or 'train/01.jsonl'"):
        load_corpus("pile", data_dir=tmp_path, **{**SMALL, "train_files": ["train/01.jsonl.zst"]})
