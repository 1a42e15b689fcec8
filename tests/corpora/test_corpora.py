"""Corpora: token arrays against ids computed independently from the source text, caching, errors."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest

from mixerzoo.corpora import CORPORA, load_corpus
from mixerzoo.registry import ConfigError

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 20


def _char_ids(text: str) -> tuple[list[str], list[int]]:
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return chars, [stoi[c] for c in text]


@pytest.fixture
def char_dir(tmp_path):
    d = tmp_path / "sc"
    d.mkdir()
    (d / "input.txt").write_text(TEXT)
    return d


def test_registry_lists_corpora_and_names_unknown():
    assert {"char", "kjv", "text", "text8", "enwik8", "wikitext103"} <= set(CORPORA.names())
    with pytest.raises(ConfigError, match=r"unknown corpus 'wikitext-103' \(did you mean 'wikitext103'\?\)"):
        load_corpus("wikitext-103")


def test_char_matches_nanogpt_prepare(char_dir):
    c = load_corpus("char", data_dir=char_dir)
    chars, ids = _char_ids(TEXT)
    n = int(len(ids) * 0.9)  # nanoGPT: data[:int(n*0.9)]
    assert c.vocab_size == len(chars) and c.unit == "char"
    assert isinstance(c.splits["train"], np.memmap)
    assert c.splits["train"].tolist() == ids[:n]
    assert c.splits["val"].tolist() == ids[n:]
    assert c.decode(c.encode("hear me speak")) == "hear me speak"
    assert c.encode("All").tolist() == [chars.index(ch) for ch in "All"]
    with pytest.raises(ConfigError, match="not in this corpus's vocabulary"):
        c.encode("Z")


def test_cache_reused_then_rebuilt_when_the_file_changes(char_dir, monkeypatch):
    first = load_corpus("char", data_dir=char_dir)
    assert first.cache_path.parent == char_dir / ".mixerzoo-cache"

    def no_build(self, workdir):
        raise AssertionError("rebuilt although the cache entry is valid")

    monkeypatch.setattr(CORPORA.get("char"), "build", no_build)
    again = load_corpus("char", data_dir=char_dir)
    assert again.cache_path == first.cache_path
    monkeypatch.undo()
    (char_dir / "input.txt").write_text(TEXT + "Zounds!\n")
    changed = load_corpus("char", data_dir=char_dir)
    assert changed.cache_path != first.cache_path
    assert changed.vocab_size == len(set(TEXT + "Zounds!\n"))


def test_broken_cache_entry_is_rebuilt(char_dir):
    c = load_corpus("char", data_dir=char_dir)
    (c.cache_path / "train.bin").write_bytes(b"\x00")  # truncated
    again = load_corpus("char", data_dir=char_dir)
    assert again.splits["train"].tolist() == _char_ids(TEXT)[1][: int(len(TEXT) * 0.9)]


def test_missing_file_and_directory_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"file 'input.txt' not found in data directory '.*empty'"):
        (tmp_path / "empty").mkdir()
        load_corpus("char", data_dir=tmp_path / "empty")
    with pytest.raises(ConfigError, match="give --data-dir"):
        load_corpus("text8")
    with pytest.raises(ConfigError, match="data directory '.*nope' does not exist"):
        load_corpus("enwik8", data_dir=tmp_path / "nope")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "input.txt").write_bytes(b"ab\xff\xfe")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_corpus("char", data_dir=tmp_path / "bin")


def _text8_bytes(n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return bytes(rng.choice(list(b"abcdefghijklmnopqrstuvwxyz "), size=n).tolist())


def test_text8_standard_split_from_file_and_zip(tmp_path):
    raw = _text8_bytes(1000)
    (tmp_path / "text8").write_bytes(raw)
    c = load_corpus("text8", data_dir=tmp_path, n_train=900, n_val=50, n_test=50)
    chars = sorted(set(raw.decode()))
    ids = [chars.index(ch) for ch in raw.decode()]
    assert c.vocab_size == 27
    assert c.splits["train"].tolist() == ids[:900]
    assert c.splits["val"].tolist() == ids[900:950]
    assert c.splits["test"].tolist() == ids[950:]
    assert c.decode(c.splits["val"]) == raw[900:950].decode()

    zdir = tmp_path / "z"
    zdir.mkdir()
    with zipfile.ZipFile(zdir / "text8.zip", "w") as zf:
        zf.writestr("text8", raw)
    z = load_corpus("text8", data_dir=zdir, n_train=900, n_val=50, n_test=50)
    assert z.splits["test"].tolist() == ids[950:]


def test_text8_errors(tmp_path):
    (tmp_path / "text8").write_bytes(_text8_bytes(100))
    with pytest.raises(ConfigError, match=r"holds 100 bytes, fewer than the splits need"):
        load_corpus("text8", data_dir=tmp_path)  # the standard 90M/5M/5M
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "text8.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ConfigError, match="is not a readable zip archive"):
        load_corpus("text8", data_dir=bad, n_train=10, n_val=5, n_test=5)


def test_enwik8_is_byte_level(tmp_path):
    raw = "<page><title>Ä</title>\n".encode() * 10
    (tmp_path / "enwik8").write_bytes(raw)
    c = load_corpus("enwik8", data_dir=tmp_path, n_train=150, n_val=40, n_test=40)
    assert c.vocab_size == 256 and c.unit == "byte"
    assert c.splits["train"].tolist() == list(raw[:150])
    assert c.splits["test"].tolist() == list(raw[190:230])


def test_wikitext103_word_level(tmp_path):
    (tmp_path / "wiki.train.tokens").write_text(" = Valkyria = \n the game the end \n")
    (tmp_path / "wiki.valid.tokens").write_text(" the unseen game \n")
    (tmp_path / "wiki.test.tokens").write_text(" the end \n")
    c = load_corpus("wikitext103", data_dir=tmp_path)
    train_words = "= Valkyria = <eos> the game the end <eos>".split()
    counts = {w: train_words.count(w) for w in train_words}
    vocab = sorted(counts, key=lambda w: (-counts[w], w)) + ["<unk>"]
    assert c.meta["vocab"]["words"] == vocab
    assert c.splits["train"].tolist() == [vocab.index(w) for w in train_words]
    assert c.splits["val"].tolist() == [vocab.index(w) for w in "the <unk> game <eos>".split()]
    assert c.unit == "token"


def test_wikitext103_missing_split_file(tmp_path):
    (tmp_path / "wiki.train.tokens").write_text("a b\n")
    with pytest.raises(ConfigError, match="'wiki.valid.tokens'.* not found in data directory"):
        load_corpus("wikitext103", data_dir=tmp_path)


def test_text_bpe_round_trip_and_tokenizer_file(tmp_path):
    (tmp_path / "book.txt").write_text(TEXT)
    c = load_corpus("text", data_dir=tmp_path, file="book.txt", vocab_size=300)
    assert 257 <= c.vocab_size <= 300 and c.unit == "token"
    all_ids = np.concatenate([c.splits["train"], c.splits["val"]])
    assert c.decode(all_ids) == TEXT
    assert len(all_ids) < len(TEXT.encode())  # merges learned on this text compress it
    assert c.decode(c.encode("hear me speak")) == "hear me speak"
    (tmp_path / "tok.json").write_bytes((c.cache_path / "tokenizer.json").read_bytes())
    loaded = load_corpus("text", data_dir=tmp_path, file="book.txt", tokenizer_file="tok.json")
    assert loaded.splits["train"].tolist() == c.splits["train"].tolist()


def test_text_jsonl_documents_joined_by_eot(tmp_path):
    docs = ["hello world\nsecond line", "another document"]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    c = load_corpus("text", data_dir=tmp_path, file="d.jsonl", vocab_size=260, val_fraction=0.5)
    all_ids = np.concatenate([c.splits["train"], c.splits["val"]])
    assert c.decode(all_ids) == docs[0] + "<|endoftext|>" + docs[1]
    (tmp_path / "bad.jsonl").write_text('{"body": "x"}\n')
    with pytest.raises(ConfigError, match="line 1: no string field 'text'"):
        load_corpus("text", data_dir=tmp_path, file="bad.jsonl")
    (tmp_path / "tok.json").write_text("{not json")
    with pytest.raises(ConfigError, match="tokenizer file .* cannot be read"):
        load_corpus("text", data_dir=tmp_path, file="d.jsonl", tokenizer_file="tok.json")


def test_kjv_is_bundled_and_char_level(tmp_path):
    from mixerzoo.corpora.kjv import kjv_text

    text = kjv_text(max_chars=20_000)
    assert text.startswith("The First Book of Moses, called Genesis\n\nIn the beginning God created")
    c = load_corpus("kjv", cache_dir=tmp_path, max_chars=20_000)
    chars, ids = _char_ids(text)
    assert c.vocab_size == len(chars)
    assert c.splits["train"].tolist() == ids[:18_000]
    assert c.splits["val"].tolist() == ids[18_000:]


def test_default_cache_root_without_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXERZOO_CACHE", str(tmp_path / "cache"))
    c = load_corpus("kjv", max_chars=1000)
    assert c.cache_path.parent == tmp_path / "cache"
    assert os.path.isfile(c.cache_path / "meta.json")


ROUNDS = 4


def _load_at_barrier(data_dir: str, barrier, out) -> None:
    barrier.wait()
    try:
        c = load_corpus("char", data_dir=data_dir)
        out.put((int(c.splits["train"][:100].sum()), str(c.cache_path)))
    except Exception as err:  # reported to the parent, which fails the test with it
        out.put((repr(err), None))


def test_ranks_building_one_cache_entry_at_once_all_load_it(tmp_path):
    """torchrun's ranks each load the corpus at start; none may remove the entry another just built."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for round_ in range(ROUNDS):
        data = tmp_path / f"d{round_}"
        data.mkdir()
        (data / "input.txt").write_text("to be, or not to be, that is the question. " * 400)
        barrier, out = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_load_at_barrier, args=(str(data), barrier, out)) for _ in range(4)]
        for p in procs:
            p.start()
        got = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        assert len(set(got)) == 1 and got[0][1] is not None, got
        entries = [n for n in os.listdir(data / ".mixerzoo-cache") if not n.startswith(".lock-")]
        assert entries == [os.path.basename(got[0][1])]  # one entry, no build folder left behind


def _load_and_report(data_dir: str, out) -> None:
    c = load_corpus("char", data_dir=data_dir)
    out.put(os.stat(c.cache_path / "train.bin").st_ino)


def test_a_rank_that_waited_for_the_entry_lock_uses_the_entry_built_meanwhile(char_dir):
    """While one process holds the entry's lock and builds it, another waits, then opens that build."""
    import multiprocessing as mp

    from mixerzoo.corpora.base import cache_root, entry_lock

    builder = CORPORA.get("char")(data_dir=char_dir)
    root = cache_root(builder.data_dir, None)
    root.mkdir()
    entry = root / f"char-{builder.cache_key()}"
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    with entry_lock(root / f".lock-{entry.name}"):
        waiter = ctx.Process(target=_load_and_report, args=(str(char_dir), out))
        waiter.start()  # it blocks on the lock, or reaches it once released: either way, after the build
        builder._write_entry(root, entry)
        built = os.stat(entry / "train.bin").st_ino
    assert out.get(timeout=120) == built
    waiter.join()
    assert waiter.exitcode == 0
