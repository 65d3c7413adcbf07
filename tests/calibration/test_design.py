"""The designed calibration runs (calibration/design.py, ``calibration.run plan``) and what the fit needs of them:
distinct experiment names per trace, and a free parameter's range moved from the command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from calibration import run, sources
from calibration.candidates import by_name, with_range
from calibration.design import DESIGN


def test_a_dry_run_lists_each_designed_run_and_a_total_that_is_their_sum(capsys, tmp_path: Path) -> None:
    argv = ["plan", "--clients", "2", "--calls", "100", "--duration", "10", "--dry-run", "--out", str(tmp_path)]
    code = run.run(argv, credentials=lambda: False)
    out = capsys.readouterr().out
    assert code == 0 and "nothing deployed" in out
    costs = [float(c) for c in re.findall(r"at most \$([0-9.]+)", out)]
    total = float(re.search(r"upper-bound cost of the plan: \$([0-9.]+)", out).group(1))
    assert len(costs) == len(DESIGN) and total == pytest.approx(sum(costs), abs=1e-4)
    for r in DESIGN:
        assert f"  {r.name}: " in out
    assert "2 clients × 2 calls in flight" in out  # light: 1/40 of the calls
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_light_and_from_zero_runs_change_what_the_design_says(tmp_path: Path) -> None:
    args = run.parser().parse_args(["plan", "--clients", "8", "--calls", "1000"])
    lines = {r.name: run.design.argv(args, r, tmp_path) for r in DESIGN}
    opt = {n: dict(zip(v[1::2], v[2::2], strict=False)) for n, v in lines.items()}
    assert opt["light"]["--calls"] == "25" and opt["long"]["--duration"] == "180"
    assert opt["from-zero"]["--calls"] == "25" and opt["from-zero"]["--max-inputs"] == "25"  # 200 / 8 containers
    assert all(v[0] == "spawn" for v in lines.values())


def test_a_plan_run_id_too_long_for_its_runs_is_one_line_exit_2(capsys) -> None:
    assert run.main(["plan", "--run-id", "a" * 23, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--run-id" in err[0]


def test_traces_of_one_way_get_names_their_paths_tell_apart(tmp_path: Path) -> None:
    a, b, c = tmp_path / "x" / "ref" / "spawn", tmp_path / "y" / "ref" / "spawn", tmp_path / "light" / "spawn"
    for p in (a, b, c):
        p.mkdir(parents=True)
    names = sources.names([str(a), str(b), str(c), "loadtest"])
    assert names == {str(a): "x/ref/spawn", str(b): "y/ref/spawn", str(c): "light/spawn"}
    assert sources.names([str(c)]) == {str(c): "spawn"}


def test_a_range_moves_the_bounds_grid_and_start_of_one_parameter() -> None:
    (c,) = with_range(by_name(["overhead"]), "start_rate=10..5000")
    f = next(f for f in c.free if f.name == "start_rate")
    assert (f.low, f.high) == (10, 5000) and f.low < f.grid[0] < f.start < f.grid[-1] < f.high
    assert f.start == pytest.approx((10 * 5000) ** 0.5, rel=0.01)
    others = {g.name: g for g in by_name(["overhead"])[0].free}
    assert all(g == others[g.name] for g in c.free if g.name != "start_rate")


@pytest.mark.parametrize("text", ["nope=1..2", "start_rate=5", "start_rate=0..10", "start_rate=9..3",
                                  "start_rate=1..inf", "start_rate=a..b"])  # fmt: skip
def test_a_bad_range_is_one_line_exit_2(text: str, capsys) -> None:
    from calibration import fit

    with pytest.raises(SystemExit) as e:
        fit.main(["--range", text, "--quick"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--range" in err[0], err
