"""The stability frontier across depth: one Firth model with a frontier line per scheme, the profile interval of
two schemes' difference of slopes, the declared `frontier_slope` endpoint, the table, findings and figure."""

import math

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from suite.analysis import depthslope, primary, primary_text
from suite.analysis.analyze import analyze
from suite.analysis.doseresponse import firth_fit
from suite.analysis.stability import outcome, stability_table
from suite.sweep.spec import SpecError, load_ablation

from test_analyze import write_run

DEPTHS = [12, 24, 48, 96, 192]
RATES = 10 ** np.arange(-3.5, -0.49, 0.5)  # 7 rates half a decade apart


def simulate(rng, slopes: dict[str, float], seeds: int, steep: float = 4.0, at12: float = -2.0):
    """Runs whose P(not ok) is logistic in log10(rate) around each scheme's line log10 LR50 = at12 +
    slope * log10(depth / 12): (rates, depths, schemes, not ok)."""
    lrs, depths, schemes, bad = [], [], [], []
    for name, slope in slopes.items():
        for d in DEPTHS:
            x50 = at12 + slope * math.log10(d / 12)
            for lr in RATES:
                p = 1 / (1 + math.exp(-steep * (math.log10(lr) - x50)))
                for _ in range(seeds):
                    lrs.append(lr), depths.append(d), schemes.append(name), bad.append(int(rng.random() < p))
    return lrs, depths, schemes, bad


def test_the_slopes_are_recovered_and_a_real_difference_is_found():
    rng = np.random.default_rng(1)
    runs = simulate(rng, {"preln": -1.0, "layerscale": 0.0}, seeds=12)
    model = depthslope.fit(*runs)
    assert model.slopes["preln"].slope == pytest.approx(-1.0, abs=0.25)
    assert model.slopes["layerscale"].slope == pytest.approx(0.0, abs=0.25)
    for s in model.slopes.values():
        assert s.low < s.slope < s.high
    diff = depthslope.difference(*runs, "layerscale", "preln")
    assert diff.estimate == pytest.approx(1.0, abs=0.3) and diff.low > 0 and diff.p < 0.001
    mid, low, high = model.lr50("layerscale", [12, 192])
    assert np.all(low < mid) and np.all(mid < high) and mid[0] == pytest.approx(10 ** -2.0, rel=0.5)
    assert model.parallel_p > 0.01 and model.linear_p > 0.01  # the model is the simulated one


def test_the_interval_is_where_the_profile_drops_by_the_critical_value_and_agrees_with_the_test():
    rng = np.random.default_rng(2)
    lrs, depths, schemes, bad = simulate(rng, {"preln": -0.5, "layerscale": -0.2}, seeds=3)
    diff = depthslope.difference(lrs, depths, schemes, bad, "layerscale", "preln")
    x, z, s, y, n = depthslope._rows(lrs, depths, schemes, bad)
    model = depthslope.fit(lrs, depths, schemes, bad)
    x, z = x - model.centre[0], z - model.centre[1]
    a, b = model.schemes.index("layerscale"), model.schemes.index("preln")

    def profile(d):  # the fixed-delta model written out by hand: A's rate column x - d z, A sharing B's depth term
        one = np.eye(2)[s]
        X = np.column_stack([x - d * z * one[:, a], one, z * (one[:, a] + one[:, b])])
        return firth_fit(X, y, n)[1]

    grid = np.linspace(diff.estimate - 2, diff.estimate + 2, 401)
    values = np.array([profile(d) for d in grid])
    assert grid[values.argmax()] == pytest.approx(diff.estimate, abs=0.02)
    inside = grid[2 * (values.max() - values) <= sps.chi2.isf(0.05, 1)]
    assert inside.min() == pytest.approx(diff.low, abs=0.02) and inside.max() == pytest.approx(diff.high, abs=0.02)
    assert (diff.p < 0.05) == (not diff.low <= 0 <= diff.high)


def test_equal_slopes_are_rarely_called_different():
    rng = np.random.default_rng(3)
    rejected = sum(depthslope.difference(*simulate(rng, {"preln": -0.5, "layerscale": -0.5}, seeds=2),
                                         "layerscale", "preln").p < 0.05 for _ in range(40))
    assert rejected <= 6  # nominal 5% (2 of 40); a miscalibrated test rejects far more


def test_nothing_to_fit_says_why():
    assert "every run ended the same way" in depthslope.fit([1e-3, 1e-2] * 2, [12, 12, 24, 24], ["a"] * 4, [0] * 4).note
    assert "two depths" in depthslope.fit([1e-3, 1e-2], [12, 12], ["a", "a"], [0, 1]).note
    runs = ([1e-3, 1e-2] * 4, [12, 12, 24, 24] * 2, ["a"] * 4 + ["b"] * 4, [0, 1, 0, 1, 0, 0, 0, 0])
    assert "b: no slope: its runs were all ok" in depthslope.difference(*runs, "a", "b").note


# ----------------------------------------------------------------------------- the declared endpoint

ABLATION = {
    "name": "demo", "base": {"data": {"name": "digits"}, "model": {"patch_size": 4}},
    "grid": {"model.depth": [12, 48], "train.lr": [0.001, 0.01, 0.1]},
    "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
    "seeds": 2,
}
SLOPE = {"scheme": "layerscale", "baseline": "preln", "endpoint": "frontier_slope"}


def test_the_endpoint_needs_a_free_depth_axis_and_takes_no_margin(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({**ABLATION, "primary": SLOPE}))
    assert load_ablation(path).primary == primary.Primary("layerscale", "preln", {}, "frontier_slope")
    for block, message in (({**SLOPE, "where": {"model.depth": 12}}, "frontier_slope needs a `model.depth` grid axis"),
                           ({**SLOPE, "margin": 5}, "no equivalence test for frontier_slope")):
        path.write_text(yaml.safe_dump({**ABLATION, "primary": block}))
        with pytest.raises(SpecError, match=message):
            load_ablation(path)
    path.write_text(yaml.safe_dump({**ABLATION, "grid": {"train.lr": [0.001, 0.01]}, "primary": SLOPE}))
    with pytest.raises(SpecError, match="two depths or more"):
        load_ablation(path)


def _folder(root, bad_at: dict[tuple[str, int], float]):
    """Runs of ABLATION: a run is not ok (did not learn, stream RMS 500, logits 100) at rates from
    bad_at[(variant, depth)] up."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump({**ABLATION, "primary": SLOPE}))
    for (variant, depth), first in bad_at.items():
        for lr in ABLATION["grid"]["train.lr"]:
            for seed in range(2):
                broken = lr >= first
                write_run(root, variant, depth, seed, lr=lr, acc=0.1 if broken else 0.8,
                          status="failed" if broken else "ok",
                          extra={"failed_reason": "never_learned", "attn_logit_peak": 100.0, "stream_rms_peak": 500.0,
                                 "steps_done": 100} if broken else {})
    return root


def test_findings_open_with_the_declared_depth_comparison_and_say_what_broke_first(tmp_path, monkeypatch):
    from suite.analysis import figures

    root = _folder(tmp_path / "r", {("preln", 12): 0.01, ("preln", 48): 0.01,
                                    ("layerscale", 12): 0.1, ("layerscale", 48): 0.01})
    drawn_with = []
    phase_diagram = figures.phase_diagram
    monkeypatch.setattr(figures, "phase_diagram", lambda runs, model, *a: drawn_with.append(model) or
                        phase_diagram(runs, model, *a))
    analyze(root, figures=True)
    assert drawn_with and all(m is not None for m in drawn_with)  # the study's fitted model, with its line
    text = (root / "findings.md").read_text()
    assert text.index("across depth (frontier_slope)") < text.index("## Stability across depth")
    assert "**Undecided**" in text and "seeds per rate, depth and scheme are needed" in text
    assert "- **layerscale**: LR50" in text and "48 at 0.01 (did not learn, stream grew, stream RMS 500, logit 100)" in text
    assert "| 2 did not learn by step 100 | 500 | 100 |" in text  # why runs were not ok: what was observed
    assert "Measured LR50 (its runs, no model), by depth: 12 0.0316; 48 0.00316." in text
    table = (root / "tables" / "stability.md").read_text()
    assert "first not ok at 0.1: did not learn, stream grew (stream RMS 500, logit 100)" in table
    assert "not ok 2/6: 2 did not learn, stream grew" in table and "measured LR50 0.0316" in table
    # issue 61: what the runs at a depth show comes first; the line's value is labelled as the model's
    assert "ok through 0.01; first not ok at 0.1" in table and "model's LR50" in table
    assert (root / "figures" / "phase_diagram.png").is_file()
    # issue 61: the report opens the figures that answer the declared question, first
    from suite.analysis.report import build

    page = build(root)
    opened = [page[i:].split('"', 1)[0] for i in [j + len('<details id="') for j in _find_all(page, '<details id="')]
              if page[i:].split(">", 1)[0].endswith(" open")]
    assert opened[:2] == ["fig-frontier-vs-depth", "fig-phase-diagram"] and len(opened) == 2
    answer = primary.evaluate(list(_runs(root)), primary.Primary("layerscale", "preln", {}, "frontier_slope"))
    assert answer.estimate < 0 and "layerscale" in primary_text.verdict(answer)


def _find_all(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def _runs(root):
    from suite.results import run_records
    return run_records(root)


def test_the_table_counts_each_cause():
    runs = [{"variant": "a", "model.depth": d, "train.lr": lr, "status": st, "failed_reason": why, "seed": s}
            for d in (12, 24) for s in range(2)
            for lr, st, why in ((1e-3, "ok", None), (1e-2, "failed", "never_learned"), (1e-1, "diverged", None))]
    frame = stability_table(runs, ["variant", "model.depth", "train.lr"], "a")
    assert list(frame["n_not_learned"]) == [2, 2] and list(frame["n_diverged"]) == [2, 2]
    assert list(frame["first_not_ok_lr"]) == [1e-2, 1e-2] and set(frame["first_cause"]) == {"did not learn"}
    assert [outcome(r) for r in runs[:3]] == ["ok", "did not learn", "diverged"]


def test_a_superseded_study_says_so_first_in_one_escaped_line(tmp_path):
    """`superseded_by:` (a results folder's ablation.yaml travels between people: untrusted text) becomes one
    line at the top of findings.md, its markup inert; anything but a string is refused by the file check."""
    from suite.analysis.findings import superseded_lines
    from suite.sweep.spec import SpecError, load_ablation

    root = _folder(tmp_path / "r", {("preln", 12): 0.1, ("preln", 48): 0.1, ("layerscale", 12): 0.1,
                                    ("layerscale", 48): 0.1})
    raw = yaml.safe_load((root / "ablation.yaml").read_text())
    (root / "ablation.yaml").write_text(yaml.safe_dump({**raw, "superseded_by": "results/x\n## Verdict <script>|"}))
    lines = superseded_lines(root)
    assert len(lines) == 2 and lines[0].startswith("> **Superseded** by results/x ## Verdict \\<script>\\|.")
    analyze(root, figures=False)
    assert (root / "findings.md").read_text().splitlines()[2] == lines[0]
    from suite.analysis.report import write_report

    page = write_report(root).read_text()  # the report says it too, first in its answer, inert
    assert "Superseded" in page and "<script>" not in page.split("Superseded", 1)[1][:300]
    (root / "ablation.yaml").write_text("")
    assert superseded_lines(root) == []  # nothing to say: the analysis reports the file elsewhere
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**ABLATION, "superseded_by": ["results/x"]}))
    with pytest.raises(SpecError, match="superseded_by: expected one line naming the study"):
        load_ablation(bad)


def test_the_power_script_simulates_from_the_committed_study(capsys, monkeypatch):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("stability_power", root / "scripts" / "stability_power.py")
    power = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(power)
    monkeypatch.setattr(power, "SIMULATIONS", 2)
    power.main([str(root / "results" / "frontier")])  # a study that ran: its two questions on its own grid
    out = capsys.readouterr().out
    assert "| as fitted | 6 (as run) |" in out and "| halved | 18 |" in out and out.count("\n| ") == 7
    assert "layerscale-depth vs layerscale-cait (+0.32 as fitted): decided" in out
    power.main([str(root / "results" / "stability"), "--plan", str(root / "ablations" / "frontier.yaml")])
    out = capsys.readouterr().out  # a study before its runs: its grid, set effects, Holm over its questions
    assert "| -0.25 | +0.25 | 6 (the plan) |" in out and out.count("\n| ") == 13
    for argv, said in (([str(root / "no-such-folder")], "no such folder"),
                       ([str(root / "results" / "default")], "declares no frontier_slope comparison"),
                       ([str(root / "results" / "stability"), "--plan", str(root / "ablations" / "default.yaml")],
                        "simulates only frontier_slope questions"),
                       ([str(root / "results" / "stability"), "--plan", str(root / "missing.yaml")], "not found"),
                       ([str(root / "results" / "default"), "--plan", str(root / "ablations" / "frontier.yaml")],
                        "its runs fit no frontier model"),  # was an IndexError
                       ([str(root / "results" / "mechanisms"), "--plan", str(root / "ablations" / "frontier.yaml")],
                        "no frontier line for layerscale-cait")):  # was a KeyError
        with pytest.raises(SystemExit) as stop:  # a bad folder or file: one line, exit 2, no traceback
            power.main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and said in err and err.count("\n") == 1, (argv, err)


def test_a_model_lr50_past_every_rate_run_at_its_depth_says_it_extrapolates():
    """The frontier study's Pre-LN at depth 192: the model put LR50 at 0.0068, under the lowest rate run there (0.008),
    and nothing said so (an outside review)."""
    from pathlib import Path

    from suite.analysis.findings import depth_lines
    from suite.grouping import group_keys
    from suite.results import run_records

    runs = run_records(Path(__file__).resolve().parents[2] / "results" / "frontier", from_csv=True)
    keys = group_keys(runs)
    frame = stability_table(runs, keys, "preln")
    row = frame[(frame["variant"] == "preln")].set_index("model.depth")
    lowest = min(float(r["train.lr"]) for r in runs if r["variant"] == "preln" and r["model.depth"] == 192)
    assert row.loc[192, "lr50"] < lowest and row.loc[192, "lr50_outside"] == "below"
    assert row.loc[12, "lr50_outside"] == ""
    text = "\n".join(depth_lines(frame, keys, "preln"))
    assert "(below the rates run there) at depth 192" in text
