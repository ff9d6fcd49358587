"""suite.engine.outcome: a run is judged on held-out accuracy by an exact binomial test."""

from scipy import stats as sps

from suite.engine.outcome import judge
from suite.learned import ALPHA, learned


def test_learned_is_a_one_sided_binomial_test_against_the_largest_class():
    # 450 held-out examples, largest class share 0.11: 66 correct (14.7%) is the least that is significant
    assert learned(66 / 450, 450, 0.11) and not learned(65 / 450, 450, 0.11)
    assert sps.binom.sf(65, 450, 0.11) < ALPHA <= sps.binom.sf(64, 450, 0.11)
    assert not learned(0.9, 0, 0.1)


def test_learned_agrees_with_scipys_binomtest_at_every_count():
    for n, majority in ((1, 0.5), (20, 0.1), (450, 0.11), (1000, 0.5), (37, 1.0), (37, 0.0)):
        for correct in range(n + 1):
            p = sps.binomtest(correct, n, majority, alternative="greater").pvalue
            assert learned(correct / n, n, majority) == (p < ALPHA), (n, majority, correct, p)


def test_the_17_7_percent_ok_and_19_8_percent_failed_inversion_cannot_happen():
    """The old rule judged the training loss: a run at 17.7% validation accuracy was ok and two at 19.8%
    failed. Judged on held-out accuracy, the status is a monotone function of the final accuracy."""
    n, majority = 450, 0.11
    statuses = [judge([(300, acc)], n, majority)[0] for acc in (0.10, 0.14, 0.177, 0.198, 0.22, 0.5)]
    assert statuses == ["failed", "failed", "failed", "failed", "ok", "ok"]  # ok from 2 x 11% (the floor)
    accs = [a / 1000 for a in range(0, 1001, 5)]
    ok = [judge([(300, a)], n, majority)[0] == "ok" for a in accs]
    assert ok == sorted(ok)  # never ok below an accuracy that failed


def test_never_learned_collapsed_and_steps_to_learn():
    n, majority = 450, 0.11
    assert judge([(50, 0.1), (100, 0.11)], n, majority) == ("failed", "never_learned", None)
    assert judge([(50, 0.1), (100, 0.4), (150, 0.1)], n, majority) == ("failed", "collapsed", 100)
    assert judge([(50, 0.1), (100, 0.1), (150, 0.6)], n, majority) == ("ok", None, 150)
    assert judge([], n, majority) == ("failed", "never_learned", None)


def test_ok_needs_a_margin_over_guessing_the_largest_class():
    """The binomial test alone passed 14% on 450 images (a model whose outputs barely depend on the input);
    ok now also needs twice the largest class share, and a run between the two is failed, too_low."""
    n, majority = 450, 0.11
    assert learned(0.15, n, majority) and judge([(300, 0.15)], n, majority) == ("failed", "too_low", 300)
    assert judge([(100, 0.3), (300, 0.19)], n, majority) == ("failed", "too_low", 100)
    assert judge([(300, 0.2201)], n, majority)[0] == "ok" and judge([(300, 0.2199)], n, majority)[0] == "failed"


def test_two_classes_or_one_large_class_can_still_be_ok():
    """Twice a share of a half is 100%: the floor is capped at halfway from the share to 100%, which binds only past a
    share of a third, so ten or three balanced classes keep twice their share."""
    from suite.engine.outcome import floor

    assert floor(0.1) == 0.2 and floor(1 / 3) == 2 / 3 and floor(0.5) == 0.75 and floor(0.6) == 0.8
    assert judge([(100, 0.95)], 400, 0.5) == ("ok", None, 100)
    assert judge([(100, 0.74)], 400, 0.5) == ("failed", "too_low", 100)  # passes the test, under the floor
    assert judge([(100, 0.9)], 400, 0.6)[0] == "ok" and judge([(100, 0.79)], 400, 0.6)[0] == "failed"
    accs = [a / 1000 for a in range(0, 1001, 5)]
    for majority in (0.2, 0.34, 0.5, 0.9):
        ok = [judge([(300, a)], 400, majority)[0] == "ok" for a in accs]
        assert ok == sorted(ok) and any(ok), majority  # monotone, and reachable below 100%
