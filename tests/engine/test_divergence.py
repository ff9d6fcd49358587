"""suite.engine.divergence: every rule fires on a loss history built to trip it, and on nothing else."""

import math

import pytest

from suite.engine.divergence import SCALER, Rules, Watch

LN10 = math.log(10)


def replay(history, rules=None, skipped=()):
    """Feed ``history`` (one loss per step) to a fresh watch; the first verdict, or None, and the watch."""
    rules = rules or Rules(LN10)
    watch = Watch()
    for step, loss in enumerate(history):
        verdict = watch.observe(rules, step, loss, 1.0, skipped=step in skipped)
        if verdict is not None:
            return verdict, watch
    return None, watch


def learning(n=100, start=LN10, end=0.5):
    """A loss falling geometrically from ``start`` to ``end`` over ``n`` steps."""
    return [start * (end / start) ** (i / (n - 1)) for i in range(n)]


def test_a_healthy_run_trips_no_rule():
    verdict, watch = replay(learning(300))
    assert verdict is None and watch.seen == 300 and watch.learned_at is not None and watch.returned_at is None


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nonfinite_loss_or_gradient(bad):
    watch = Watch()
    assert watch.observe(Rules(LN10), 0, 2.0, 1.0) is None
    assert watch.observe(Rules(LN10), 1, bad, 1.0).reason == "nonfinite"
    verdict = Watch().observe(Rules(LN10), 3, 2.0, bad)
    assert (verdict.reason, verdict.step) == ("nonfinite", 3) and "gradient norm" in verdict.detail


IMMEDIATE = Rules(LN10, spike_window=0)  # the first spike ends the run


def test_a_spike_during_warm_up_counts_once_the_reference_exists():
    """The old rule was off during the warm-up; this one needs only ``spike_after`` steps seen."""
    history = [LN10] * 6 + [5 * LN10]
    verdict, _ = replay(history, IMMEDIATE)
    assert (verdict.reason, verdict.step) == ("spike", 6)
    early = [LN10] * 3 + [5 * LN10] + [LN10] * 3  # before the reference exists: not a spike
    assert replay(early, IMMEDIATE)[0] is None
    assert replay(history, Rules(LN10, spike_after=10, spike_window=0))[0] is None


def test_a_spike_must_exceed_both_the_factor_and_chance():
    """A loss 5x a tiny best (0.05 -> 0.25) is below ln C: learning noise, not a blow-up."""
    history = learning(50, end=0.05) + [0.25]
    assert replay(history, IMMEDIATE)[0] is None
    verdict, _ = replay(learning(50, end=0.05) + [LN10 * 1.01], IMMEDIATE)
    assert verdict.reason == "spike" and verdict.step == 50


def test_a_spike_that_recovers_within_the_window_is_counted_and_the_run_goes_on():
    base = learning(50, end=0.05)
    recovers = base + [LN10 * 2] * 20 + [0.1] * 30 + [LN10 * 2] * 5 + [0.1] * 10  # 20 steps above: inside 20
    verdict, watch = replay(recovers)
    assert verdict is None and watch.spikes_recovered == 2 and watch.spike_at is None
    stays = base + [LN10 * 2] * 21  # the window's 20 steps after the first all above: a spike, dated at its start
    verdict, watch = replay(stays)
    assert (verdict.reason, verdict.step) == ("spike", 50) and "still above after 20 steps" in verdict.detail
    assert replay(base + [LN10 * 2] * 20)[0] is None  # the run ended inside the window: the accuracy decides
    assert replay(stays, Rules(LN10, spike_window=40))[0] is None


def test_collapse_back_to_chance_after_learning():
    """Learned (smoothed loss <= 0.8 ln C), back within 5% of ln C from step ~150 and there for 50
    steps: collapse, dated at the step it returned."""
    history = learning(100, end=0.8) + [LN10] * 100
    verdict, watch = replay(history)
    assert verdict.reason == "collapse"
    # the EMA needs ~22 steps to climb from 0.8 to within 5% of ln 10
    assert 100 < verdict.step < 130 and watch.returned_at == verdict.step
    assert "stayed there for 50 steps" in verdict.detail


def test_no_collapse_without_having_learned_or_without_staying():
    never = [LN10 * 0.9] * 300  # never below 0.8 ln C: a run that did not learn is `failed`, not diverged
    assert replay(never)[0] is None
    brief = learning(100, end=0.8) + [LN10] * 40 + learning(100, end=0.5, start=0.8)  # back, then learns again
    assert replay(brief)[0] is None
    # the window counts consecutive steps: a dip below the band restarts it
    dips = learning(100, end=0.8) + ([LN10] * 45 + [0.5] * 30) * 3
    assert replay(dips)[0] is None


def test_collapse_thresholds_are_the_config_keys():
    history = learning(100, end=1.5) + [LN10] * 100  # learned only to 0.65 ln C
    assert replay(history)[0].reason == "collapse"
    assert replay(history, Rules(LN10, collapse_below=0.6))[0] is None  # never reached 0.6 ln C
    short = learning(100, end=0.8) + [LN10] * 45
    assert replay(short)[0] is None
    assert replay(short, Rules(LN10, collapse_window=10))[0].reason == "collapse"
    near = learning(100, end=0.8) + [0.9 * LN10] * 100  # 10% below ln C: outside a 5% band, inside 15%
    assert replay(near)[0] is None
    assert replay(near, Rules(LN10, collapse_within=0.15))[0].reason == "collapse"


def test_scale_collapse_on_a_run_of_skipped_steps():
    history = learning(100) + [1.0] * 30
    skipped = set(range(100, 130))
    verdict, watch = replay(history, skipped=skipped)
    assert (verdict.reason, verdict.step) == ("scale_collapse", 119) and watch.skip_run == 20
    # a skipped step's gradient is not finite, and that is the scaler's business, not `nonfinite`
    assert Watch().observe(Rules(LN10), 0, 2.0, math.inf, skipped=True) is None


def test_scale_collapse_at_the_scale_floor_and_the_scalers_growth():
    """Scattered skips halve the scale each time; 2000 clean steps in a row double it (GradScaler's rule)."""
    rules = Rules(LN10, scale_max_skips=10**6, scale_min=1.5 * SCALER["init_scale"] / 2**5)  # below it at the 5th skip
    history = [2.0] * 12
    verdict, watch = replay(history, rules, skipped={1, 3, 5, 7, 9})
    assert (verdict.reason, verdict.step) == ("scale_collapse", 9) and watch.skipped == 5
    assert "fell to" in verdict.detail
    watch = Watch()
    for step in range(SCALER["growth_interval"]):
        watch.observe(Rules(LN10), step, 2.0, 1.0)
    assert watch.scale == SCALER["init_scale"] * SCALER["growth_factor"]


def test_skips_do_not_feed_the_smoothed_loss():
    _, watch = replay([2.0, 2.0, 9.0, 2.0], skipped={2})
    assert watch.seen == 3 and watch.ema == pytest.approx(2.0) and watch.skipped == 1



def test_skipped_steps_do_not_count_towards_the_collapse_window():
    """fp16's skipped steps update neither the smoothed loss nor the window: 80 steps back at chance
    collapse, but not when every other one of the last 50 was skipped."""
    history = learning(100, end=0.8) + [LN10] * 80
    assert replay(history)[0].reason == "collapse"
    no_floor = Rules(LN10, scale_max_skips=10**6, scale_min=0.0)
    skipped = set(range(130, 180, 2))
    verdict, watch = replay(history, no_floor, skipped=skipped)
    assert verdict is None and watch.skipped == 25 and 0 < watch.near < 50


def test_isolated_skips_are_no_run_of_skips():
    """25 skips, one every 4 steps (the scale floor out of reach): a clean step between them restarts the count, so no
    rule fires; counted in all, they would read as 'skipped 20 steps in a row'."""
    history = learning(100) + [1.0] * 100
    verdict, watch = replay(history, Rules(LN10, scale_min=0.0), skipped=set(range(100, 200, 4)))
    assert verdict is None and watch.skipped == 25 and watch.skip_run == 0


def test_the_spike_reference_is_the_best_smoothed_loss_not_a_single_low_step():
    """One step that dips to 0.01 moves the smoothed loss a little, so a later loss of 3 ln C is no spike against it;
    against the raw 0.01 it would be 300x."""
    history = [LN10] * 10 + [0.01] + [LN10] * 5 + [3 * LN10]
    assert replay(history, IMMEDIATE)[0] is None


def test_a_collapse_after_a_dip_is_dated_at_the_last_return():
    """Back at chance, a dip below the band, back again for good: dated at the second return, not the first."""
    history = learning(100, end=0.8) + [LN10] * 45 + [0.5] * 30 + [LN10] * 100
    verdict, watch = replay(history)
    assert verdict.reason == "collapse" and verdict.step > 175 and watch.returned_at == verdict.step


def test_the_rules_fire_at_their_boundaries_not_one_step_off():
    """spike_after steps seen make the reference (the next step can spike); collapse_window steps back make a collapse
    (its detail names that many)."""
    at = [LN10] * IMMEDIATE.spike_after + [5 * LN10]  # step spike_after is the (spike_after + 1)-th seen
    assert replay(at, IMMEDIATE)[0].step == IMMEDIATE.spike_after
    assert replay(at[:-2] + at[-1:], IMMEDIATE)[0] is None  # only spike_after - 1 seen before it
    learned = learning(100, end=0.8)
    first = replay(learned + [LN10] * 200)[0]  # the step the smoothed loss came back, and the verdict's count
    stays = learned + [LN10] * (first.step - 100 + 50)
    assert replay(stays)[0] is not None and replay(stays[:-1])[0] is None
