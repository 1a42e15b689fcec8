"""The measured quick-preset wall times that ``mixerzoo study list`` shows."""

from mixerzoo.studies.dispatch import shipped_studies
from mixerzoo.studies.quick_times import quick_time_text, quick_times


def test_every_measured_time_names_a_shipped_study_and_a_date():
    times = quick_times()
    assert set(times) <= set(shipped_studies())
    for name, entry in times.items():
        assert entry["seconds"] > 0 and str(entry["date"]).startswith("2026-"), name
        assert set(entry["after"]) <= set(shipped_studies()) - {name}, name


def test_the_text_says_minutes_and_marks_an_upper_bound(monkeypatch):
    from mixerzoo.studies import quick_times as qt

    fake = {
        "slow": {"seconds": 689.1, "date": "2026-11-26", "beside": False, "after": []},
        "tiny": {"seconds": 0.5, "date": "2026-11-27", "beside": True, "after": []},
    }
    monkeypatch.setattr(qt, "quick_times", lambda: fake)
    assert qt.quick_time_text("slow") == "~11 min (2026-11-26)"
    assert qt.quick_time_text("tiny") == "<=1 s (2026-11-27)"  # measured beside other work
    assert qt.quick_time_text("no-such-study") == "-"


def test_the_shipped_times_read_as_text():
    times = quick_times()
    # icll-fig4 reuses icll-fig2's 2-layer runs in one results folder: its time is what it adds
    fig4 = times["icll-fig4"]
    minutes = f"~{fig4['seconds'] / 60:.0f} min"
    assert quick_time_text("icll-fig4") == f"{minutes} after icll-fig2 ({fig4['date']})"
    fig2d = times["icll-fig2d"]  # its runs are its own (4,000 test instances): a time of its own
    assert quick_time_text("icll-fig2d") == f"~{fig2d['seconds'] / 60:.0f} min ({fig2d['date']})"


def test_study_list_shows_the_column(run_cli):
    code, out, err = run_cli(["study", "list"])
    assert code == 0, err
    header, *rows = out.splitlines()
    assert "quick, 2 cores" in header
    expected = quick_time_text("mad")  # the shipped measurement, e.g. "~15 min (2026-12-02)"
    assert expected.startswith("~") and expected.endswith(")")
    assert any(r.startswith("mad ") and expected in r for r in rows)


def test_the_footer_sums_the_times_and_names_the_slow_and_the_untimed(monkeypatch):
    from mixerzoo.studies import quick_times as qt

    fake = {
        "a": {"seconds": 600.0, "date": "2026-11-28", "beside": False, "after": []},
        "b": {"seconds": 1500.0, "date": "2026-11-28", "beside": False, "after": ["a"]},
    }
    monkeypatch.setattr(qt, "quick_times", lambda: fake)
    text = qt.quick_total_text(["a", "b", "c"])
    assert "~0 h 35 min for the 2 of 3 studies timed;" in text  # 600 + 1,500 s; no upper bound
    assert text.endswith("over the 20-minute goal: b; not timed yet: c")
    fake["a"]["beside"] = True
    assert "(an upper bound: some were timed beside other work)" in qt.quick_total_text(["a"])
    assert qt.quick_total_text(["a"]).endswith("goal: none")


def test_study_list_ends_with_the_total_of_the_studies_run_all_runs(run_cli):
    code, out, err = run_cli(["study", "list"])
    assert code == 0, err
    footer = out.splitlines()[-1]
    assert footer.startswith("quick presets, one after another on 2 cores: ~")
    assert "scorecard" not in footer  # it scores a given mixer: not one of --all's studies


def test_a_paper_only_quick_preset_reads_so_in_the_list_and_show_gives_its_reason(run_cli):
    from mixerzoo.studies.dispatch import find_study

    exp = find_study("zoology-multihead-hyena").load("quick")
    assert exp.paper_only  # measured: multi-head Hyena does not learn MQAR within a CPU budget
    code, out, err = run_cli(["study", "list"])
    assert code == 0, err
    (row,) = [r for r in out.splitlines() if r.startswith("zoology-multihead-hyena ")]
    assert "quick 0" in row and "paper preset only" in row
    code, out, err = run_cli(["study", "show", "zoology-multihead-hyena"])
    assert code == 0, err
    assert f"quick: paper preset only: {' '.join(exp.paper_only.split())}" in out


def test_a_study_timed_after_another_in_the_one_folder_names_the_ones_whose_runs_it_reused():
    """``study run --all`` runs the studies in name order in one results folder, and a run is reused
    by its config hash in any study: a quick time that includes no training of a shared run says so
    (``after``), for every pair of sweep studies whose quick presets plan a common run."""
    from mixerzoo.studies.dispatch import find_study

    times = quick_times()
    planned = {}
    for name in sorted(times):
        study = find_study(name)
        if study.kind == "sweep":
            planned[name] = {p.config_hash for p in study.load("quick").expand()}
    for later in planned:
        shared = {earlier for earlier in planned if earlier < later and planned[earlier] & planned[later]}
        assert shared <= set(times[later]["after"]), (later, shared)
