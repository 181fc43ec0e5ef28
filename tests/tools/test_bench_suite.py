"""scripts/bench_suite.py: the suite's time read as its budgets state them, the median of several runs, with how busy
the cores were; the whole suite against 10 minutes, `make test-quick` against 60 s."""

import statistics
import sys

import pytest
from conftest import load_script

BENCH = load_script("bench_suite")


def test_the_cpu_line_gives_busy_and_all_seconds_by_hand():
    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s
    busy, everything = BENCH.busy_and_total("cpu  1000 500 200 3000 100 10 5 40 0 0", 100)
    assert busy == pytest.approx((1000 + 500 + 200 + 10 + 5) / 100)
    assert everything == pytest.approx((1000 + 500 + 200 + 3000 + 100 + 10 + 5) / 100)  # steal is in neither
    for wrong in ("cpu0 1 2 3 4 5 6 7 8", "intr 1 2 3", "", "cpu 1 2"):
        with pytest.raises(ValueError, match="summary line"):
            BENCH.busy_and_total(wrong, 100)


def test_minutes_and_the_line_a_run_prints():
    assert BENCH.minutes(312.4) == "5 min 12 s" and BENCH.minutes(59.6) == "1 min 00 s"
    run = {"seconds": 295.3, "status": 0, "busy": 572.0, "available": 589.0}
    assert BENCH.describe(run) == "4 min 55 s, passed; 572 of 589 CPU-seconds busy (97 %)"
    assert BENCH.describe({**run, "status": 1, "busy": None}) == "4 min 55 s, FAILED (exit 1)"


def test_each_run_is_timed_and_the_median_is_read_against_the_budget(capsys):
    quick = f"{sys.executable} -c pass"
    assert BENCH.main(["--runs", "3", "--command", quick]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["run 1", "run 2", "run 3"]
    assert all(", passed" in line for line in lines[:3])
    assert lines[3].startswith("median of 3: 0 min 0") and lines[3].endswith("within the budget of 10 min 00 s")
    failing = f"{sys.executable} -c 'raise SystemExit(3)'"
    assert BENCH.main(["--runs", "1", "--command", failing]) == 1
    assert "FAILED (exit 3)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        BENCH.main(["--runs", "0"])


def test_the_median_is_statistics_median_of_the_runs(monkeypatch, capsys):
    times = iter([660.0, 584.0, 610.0])
    monkeypatch.setattr(BENCH, "one_run", lambda command: {"seconds": next(times), "status": 0, "busy": None,
                                                           "available": None})
    assert BENCH.main(["--runs", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"median of 3: {BENCH.minutes(statistics.median([660.0, 584.0, 610.0]))}, over the budget of 10 min 00 s")


def test_quick_times_make_test_quick_against_its_own_budget(monkeypatch, capsys):
    commands, times = [], iter([58.0, 64.0, 55.0])

    def fake_run(command):
        commands.append(command)
        return {"seconds": next(times), "status": 0, "busy": None, "available": None}

    monkeypatch.setattr(BENCH, "one_run", fake_run)
    assert BENCH.main(["--quick"]) == 0
    assert commands == [["make", "-s", "test-quick"]] * 3
    assert capsys.readouterr().out.splitlines()[-1] == "median of 3: 0 min 58 s, within the budget of 1 min 00 s"
