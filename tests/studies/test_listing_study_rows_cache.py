"""``study list`` reads each study's row from a cache keyed by the study file's content and the
code (``studies/study_list.py``): a second listing computes nothing, an edited file is computed
again, and a cache that cannot be read is ignored."""

from __future__ import annotations

from mixerzoo.studies.study_list import CACHE_FILE, study_rows_cached


def rows_of(tmp_path, files, calls):
    def row(name):
        calls.append(name)
        return {"name": name, "kind": "sweep", "runs": {"quick": len(files[name].read_text())}}

    return study_rows_cached(files, row, where=tmp_path / "cache")


def study_files(tmp_path):
    files = {name: tmp_path / f"{name}.yaml" for name in ("b-study", "a-study")}
    for name, path in files.items():
        path.write_text(f"name: {name}\n")
    return files


def test_a_second_listing_reads_every_row_from_the_cache(tmp_path):
    files, calls = study_files(tmp_path), []
    first = rows_of(tmp_path, files, calls)
    assert calls == ["a-study", "b-study"]
    assert (tmp_path / "cache" / CACHE_FILE).is_file()
    again = rows_of(tmp_path, files, calls)
    assert calls == ["a-study", "b-study"]
    assert again == first
    assert [r["name"] for r in again] == ["a-study", "b-study"]
    assert again[0]["path"] == str(files["a-study"])


def test_an_edited_study_file_is_computed_again(tmp_path):
    files, calls = study_files(tmp_path), []
    rows_of(tmp_path, files, calls)
    files["b-study"].write_text("name: b-study\ngrid: {}\n")
    rows = rows_of(tmp_path, files, calls)
    assert calls == ["a-study", "b-study", "b-study"]
    assert rows[1]["runs"] == {"quick": len(files["b-study"].read_text())}


def test_a_broken_cache_is_ignored_and_rewritten(tmp_path):
    files, calls = study_files(tmp_path), []
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / CACHE_FILE).write_text("{not json")
    assert [r["name"] for r in rows_of(tmp_path, files, calls)] == ["a-study", "b-study"]
    rows_of(tmp_path, files, calls)
    assert calls == ["a-study", "b-study"]


def test_a_cache_folder_that_cannot_be_written_still_lists(tmp_path):
    files, calls = study_files(tmp_path), []
    (tmp_path / "cache").write_text("a file where the folder would be")
    assert len(rows_of(tmp_path, files, calls)) == 2
