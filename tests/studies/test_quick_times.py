"""The measured quick-preset wall times that ``mixerzoo study list`` shows."""

from mixerzoo.studies.dispatch import shipped_studies
from mixerzoo.studies.quick_times import quick_time_text, quick_times


def test_every_measured_time_names_a_shipped_study_and_a_date():
    times = quick_times()
    assert set(times) <= set(shipped_studies())
    for name, entry in times.items():
        assert entry["seconds"] > 0 and str(entry["date"]).startswith("2026-"), name
        assert set(entry["after"]) <= set(shipped_studies()) - {name}, name


def test_the_text_says_minutes_and_marks_an_upper_bound():
    times = quick_times()
    assert quick_time_text("mad") == f"~11 min ({times['mad']['date']})"
    assert quick_time_text("las-fig1-kernels").startswith("<=1 s")  # measured beside other work
    assert quick_time_text("no-such-study") == "-"
    # icll-fig2d reuses icll-fig2's 2-layer run in one results folder: its time is what it adds
    fig2d = times["icll-fig2d"]
    minutes = f"~{fig2d['seconds'] / 60:.0f} min"
    assert quick_time_text("icll-fig2d") == f"{minutes} after icll-fig2 ({fig2d['date']})"


def test_study_list_shows_the_column(run_cli):
    code, out, err = run_cli(["study", "list"])
    assert code == 0, err
    header, *rows = out.splitlines()
    assert "quick, 2 cores" in header
    assert any(r.startswith("mad ") and "~11 min" in r for r in rows)
