"""Opening the results store's database: where it lives, who may open it, and its connections.

Owns the checks made before SQLite touches a file (its 100-byte header: a file that is not SQLite,
or one of a newer schema, is refused untouched), the read-only opening (SQLite's ``mode=ro``, or
``immutable=1`` where its side files cannot be made: a read-only directory, a full disk) with the
in-memory upgrade of an earlier schema, the creation or in-place upgrade of the schema for a
writing command, and the short transactions every read and write runs in (``BEGIN IMMEDIATE`` for
writes, WAL mode, a busy timeout), SQLite's errors turned into one line (:class:`NoSpace` for a
full disk).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from mixerzoo.registry import ConfigError
from mixerzoo.store.errors import LOW_SPACE, NO_SPACE, NoSpace, _free_bytes, out_of_space
from mixerzoo.store.schema import SCHEMA_VERSION, _is_v1, _is_v2, _tables, _upgrade

DB_NAME = "mixerzoo.sqlite"
ENV_VAR = "MIXERZOO_RESULTS"


def default_results_dir() -> Path:
    """``$MIXERZOO_RESULTS`` if set (and not empty), else ``./results``."""
    return Path(os.environ.get(ENV_VAR, "").strip() or "results")


class StoreDatabase:
    """The database of a :class:`~mixerzoo.store.results.ResultsStore`: opening it and
    its connections (the store's constructor sets these attributes, then opens it)."""

    root: Path
    db_path: Path
    read_only: bool
    _immutable: bool  # read-only and SQLite's side files cannot be made here
    _memory: sqlite3.Connection | None  # an earlier schema upgraded in memory

    def _make_directory(self, path: Path, parents: bool = False) -> None:
        try:
            path.mkdir(parents=parents, exist_ok=True)
        except OSError as err:
            message = f"results directory {str(path)!r} cannot be made"
            if out_of_space(err):
                raise NoSpace(f"{message}: {NO_SPACE}") from None
            raise ConfigError(f"{message}: {err.strerror or err}") from None

    # -- connections ----------------------------------------------------------------------
    def _fail(self, err: sqlite3.Error) -> ConfigError:
        if out_of_space(err) or (
            "disk I/O error" in str(err) and not self.read_only and _free_bytes(self.root) < LOW_SPACE
        ):
            return NoSpace(f"results database {str(self.db_path)!r} cannot be written: {NO_SPACE}")
        return ConfigError(
            f"results database {str(self.db_path)!r} cannot be used ({err}); "
            "check the file and its permissions, or give another --results"
        )

    def _new_connection(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None)
        uri = f"file:{quote(str(self.db_path.resolve()))}?mode=ro{'&immutable=1' if self._immutable else ''}"
        return sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)

    @contextmanager
    def _connect(self, write: bool = False):
        """A connection in one transaction: ``BEGIN IMMEDIATE`` for writes (takes the write lock
        up front, so a read-then-write never fails with a busy snapshot), deferred for reads."""
        if write and self.read_only:
            raise ConfigError(f"results store {str(self.root)!r} was opened read-only; it cannot be written")
        if self._memory is not None:
            with self._transaction(self._memory, write):
                yield self._memory
            return
        try:
            con = self._new_connection()
        except sqlite3.Error as err:
            raise self._fail(err) from None
        try:
            with self._transaction(con, write):
                yield con
        finally:
            con.close()

    @contextmanager
    def _transaction(self, con: sqlite3.Connection, write: bool):
        try:
            try:
                con.execute("PRAGMA busy_timeout=60000")
                con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as err:
                raise self._fail(err) from None
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            try:
                con.execute("COMMIT")
            except sqlite3.Error as err:
                raise self._fail(err) from None
        except sqlite3.DatabaseError as err:
            raise self._fail(err) from None

    def _open_read_only(self) -> None:
        """Check that the file is a mixerzoo store without writing anything, then read it with
        ``mode=ro`` (``immutable=1`` when that cannot work here)."""
        version = self._header_version()  # it may lag behind the WAL, never lead
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        wal = self.db_path.with_name(DB_NAME + "-wal")
        if version == 0 and not (wal.is_file() and wal.stat().st_size > 0):
            self._immutable = True  # nothing beyond the file: identify it without SQLite's side files
        if not self._immutable and not self._readable():
            self._immutable = True  # no side files here (a read-only directory, a full disk)
        self._identify()

    def _readable(self) -> bool:
        """Whether SQLite's ``mode=ro`` works here: it needs its shared-memory side file, which a
        read-only directory or a full disk cannot hold."""
        try:
            con = self._new_connection()
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        except sqlite3.OperationalError:
            return False
        except sqlite3.Error:
            return True  # not a database, damaged: the reading itself says so
        return True

    def _identify(self) -> None:
        """A current store is read as it is; a schema-1 or -2 store through a private in-memory copy
        upgraded there; anything else is refused."""
        with self._connect() as con:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            tables = _tables(con)
            if version > SCHEMA_VERSION:
                raise self._newer(version)
            if version == SCHEMA_VERSION and {"runs", "attempts", "evals"} <= tables:
                return
            if not (_is_v2(version, tables) or (version == 0 and _is_v1(tables))):
                raise self._foreign(tables)
            memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            con.backup(memory)
        with self._transaction(memory, write=True):
            _upgrade(memory, version, self.root)
        self._memory = memory

    def _header_version(self) -> int:
        """The database's schema version from its 100-byte header, read as plain bytes: a file
        that is not SQLite is refused before SQLite opens it (and could change it)."""
        try:
            with self.db_path.open("rb") as fh:
                header = fh.read(100)
        except OSError as err:
            raise ConfigError(
                f"results database {str(self.db_path)!r} cannot be read: {err.strerror}"
            ) from None
        if not header:
            raise ConfigError(f"results database {str(self.db_path)!r} is empty: it holds no runs")
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise ConfigError(
                f"results database {str(self.db_path)!r} cannot be used (file is not a database); "
                "give another --results"
            )
        return int.from_bytes(header[60:64], "big")

    def _newer(self, version: int) -> ConfigError:
        return ConfigError(
            f"results database {str(self.db_path)!r} has schema {version}, newer than "
            f"this mixerzoo's ({SCHEMA_VERSION}); upgrade mixerzoo to read it"
        )

    def _foreign(self, tables: set[str]) -> ConfigError:
        names = ", ".join(sorted(tables)[:5]) or "none"
        return ConfigError(
            f"{str(self.db_path)!r} is not a mixerzoo results store (another program's database? "
            f"its tables: {names}); give another --results"
        )

    def _open_schema(self) -> None:
        """Create the schema in a new (empty) database, or upgrade an earlier schema in place; a
        current store is only read (so a read-only database file still opens for reading), and
        another program's database is refused untouched."""
        try:
            con = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None)
            try:
                con.execute("PRAGMA busy_timeout=60000")
                if self._schema_is_current(con):
                    return
                if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    con.execute("PRAGMA journal_mode=WAL")
                con.execute("BEGIN IMMEDIATE")
                try:
                    if not self._schema_is_current(con):
                        _upgrade(con, con.execute("PRAGMA user_version").fetchone()[0], self.root)
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise
            finally:
                con.close()
        except sqlite3.Error as err:
            raise self._fail(err) from None

    def _schema_is_current(self, con) -> bool:
        """True for a current store; False for an empty database or a schema-1 or -2 store (to create
        or upgrade); a newer schema or another program's database is refused."""
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        tables = _tables(con)
        if version == SCHEMA_VERSION and {"runs", "attempts", "evals"} <= tables:
            return True
        if (version == 0 and (not tables or _is_v1(tables))) or _is_v2(version, tables):
            return False
        raise self._foreign(tables)
