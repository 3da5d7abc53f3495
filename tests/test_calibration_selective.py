import json

import numpy as np
import pytest

from autorater.calibration import InsufficientReferencesError, SelectivePolicy


def calibrated_draw(rng, n, a=0.3, b=0.7):
    """A calibrated score model: p ~ Beta(a, b), y ~ Bernoulli(p)."""
    p = rng.beta(a, b, n)
    return p, (rng.random(n) < p).astype(int)


@pytest.mark.parametrize("start_errors", [0, 2, (0, 5), (0, 2, 6)])  # wherever the sequences start
def test_agreement_guarantee_holds_over_many_reference_draws(start_errors):
    target, confidence, draws = 0.95, 0.9, 200
    rng = np.random.default_rng(0)
    held, feasible = 0, 0
    for _ in range(draws):
        policy = SelectivePolicy(target, confidence, on_infeasible="route_all",
                                 start_errors=start_errors).fit(*calibrated_draw(rng, 300))
        p, y = calibrated_draw(rng, 20_000)  # a fresh suite, large enough to stand for the population
        auto = policy.decide(p) == "auto"
        feasible += policy.feasible_
        held += not auto.any() or np.mean((p[auto] >= 0.5) == y[auto]) >= target  # nothing auto: nothing wrong
    assert feasible >= 0.8 * draws  # the check is not vacuous
    assert held / draws >= confidence - 0.03


def test_tighter_target_never_raises_coverage():
    p, y = calibrated_draw(np.random.default_rng(1), 2000, a=0.5, b=0.5)
    coverage = [
        SelectivePolicy(target, 0.9, on_infeasible="route_all").fit(p, y).expected_coverage_
        for target in (0.8, 0.85, 0.9, 0.95, 0.97, 0.99)
    ]
    assert coverage[0] > 0
    assert all(tight <= loose for loose, tight in zip(coverage, coverage[1:]))


def test_fitted_policy_is_consistent_with_its_references():
    p, y = calibrated_draw(np.random.default_rng(2), 1000)
    policy = SelectivePolicy(0.9, 0.9).fit(p, y)
    auto = policy.decide(p) == "auto"
    assert policy.t_fail_ < 0.5 <= policy.t_success_
    assert auto.mean() == pytest.approx(policy.expected_coverage_)
    assert np.mean((p[auto] >= 0.5) == y[auto]) == pytest.approx(policy.empirical_agreement_)
    assert 0.9 <= policy.bound_ <= policy.empirical_agreement_
    curve = policy.risk_coverage_curve(p, y)
    assert np.all(np.diff(curve["coverage"]) > 0) and (curve["error_upper_bound"] >= curve["error"]).all()


def test_too_few_references_name_the_needed_count():
    p, y = calibrated_draw(np.random.default_rng(3), 20)
    with pytest.raises(InsufficientReferencesError, match="at least 45") as error:
        SelectivePolicy(0.95, 0.9, min_references=0, start_errors=0).fit(p, y)  # 0.95^45 <= 0.1 < 0.95^44
    with pytest.raises(InsufficientReferencesError, match="at least 59"):  # two sequences: 0.95^59 <= 0.05
        SelectivePolicy(0.95, 0.9, min_references=0, start_errors=(0, 5)).fit(p, y)
    with pytest.raises(InsufficientReferencesError, match="at least 124"):  # the default: the first starts at 2
        SelectivePolicy(0.95, 0.9, min_references=0).fit(p, y)
    assert isinstance(error.value, ValueError) and "route_all" in str(error.value)
    with pytest.raises(InsufficientReferencesError, match="label at least 100"):  # the floor above the 45
        SelectivePolicy(0.95, 0.9, start_errors=0).fit(*calibrated_draw(np.random.default_rng(3), 60))
    with pytest.raises(InsufficientReferencesError, match="label at least 124"):  # the start above the floor
        SelectivePolicy(0.95, 0.9).fit(*calibrated_draw(np.random.default_rng(3), 60))


def test_route_all_sends_everything_to_humans_and_round_trips():
    p, y = calibrated_draw(np.random.default_rng(4), 20)
    policy = SelectivePolicy(0.95, 0.9, on_infeasible="route_all").fit(p, y)
    assert not policy.feasible_ and policy.expected_coverage_ == 0
    assert (policy.decide(p) == "human").all()
    loaded = SelectivePolicy.from_dict(json.loads(json.dumps(policy.to_dict(), allow_nan=False)))
    assert not loaded.feasible_ and (loaded.decide(p) == "human").all()


def test_policy_round_trips_through_json():
    p, y = calibrated_draw(np.random.default_rng(5), 500)
    policy = SelectivePolicy(0.9, 0.9, max_marker_uncertainty_s=1.0).fit(p, y, np.zeros(500))
    loaded = SelectivePolicy.from_dict(json.loads(json.dumps(policy.to_dict(), allow_nan=False)))
    uncertainty = np.random.default_rng(6).uniform(0, 2, 500)
    np.testing.assert_array_equal(loaded.decide(p, uncertainty), policy.decide(p, uncertainty))


def test_uncertain_markers_go_to_humans():
    rng = np.random.default_rng(7)
    p, y = calibrated_draw(rng, 1000)
    uncertainty = rng.uniform(0, 2, 1000)
    policy = SelectivePolicy(0.9, 0.9, max_marker_uncertainty_s=1.0).fit(p, y, uncertainty)
    decisions = policy.decide(np.array([0.999, 0.999, 0.999, 0.001]), np.array([0.5, 1.5, np.nan, 3.0]))
    assert decisions.tolist() == ["auto", "human", "human", "human"]
    assert policy.expected_coverage_ <= np.mean(uncertainty <= 1.0)  # excluded from the auto set in fit too
    with pytest.raises(InsufficientReferencesError):  # nothing eligible, nothing certified
        SelectivePolicy(0.9, 0.9, max_marker_uncertainty_s=1.0).fit(p, y, np.full(1000, 5.0))
    with pytest.raises(ValueError, match="marker_uncertainty"):
        policy.decide(p)


def test_one_confident_error_ends_the_path_only_when_it_starts_at_the_first_passing_point():
    rng = np.random.default_rng(3)
    p = np.sort(rng.uniform(0.97, 1.0, 300))[::-1]  # 300 confident successes...
    y = np.ones(300, dtype=int)
    y[10] = 0  # ...the 11th most confident of which is wrong
    early = SelectivePolicy(0.95, 0.9, on_infeasible="route_all", start_errors=0).fit(p, y)
    late = SelectivePolicy(0.95, 0.9, on_infeasible="route_all", start_errors=2).fit(p, y)
    assert not early.feasible_
    assert late.feasible_ and late.bound_ >= 0.95 and late.expected_coverage_ == 1.0



def test_a_late_sequence_survives_a_cluster_of_confident_errors_that_ends_an_early_one():
    p = np.linspace(0.999, 0.97, 300)  # 300 confident references, most confident first
    y = np.ones(300, dtype=int)
    y[[20, 30, 40]] = 0  # three errors among the first few dozen
    one = SelectivePolicy(0.95, 0.9, on_infeasible="route_all", start_errors=0).fit(p, y)
    both = SelectivePolicy(0.95, 0.9, on_infeasible="route_all").fit(p, y)  # the default: (2, 5)
    assert one.expected_coverage_ < 0.2  # ended by the cluster
    assert both.feasible_ and both.expected_coverage_ == 1.0 and both.bound_ >= 0.95
    assert SelectivePolicy.from_dict(json.loads(json.dumps(both.to_dict()))).start_errors == (2, 5)


def test_each_sequence_tests_at_its_share_of_the_confidence():
    rng = np.random.default_rng(8)
    p, y = calibrated_draw(rng, 1000, a=0.5, b=0.5)
    single = SelectivePolicy(0.9, 0.9, start_errors=0).fit(p, y)
    split = SelectivePolicy(0.9, 0.9, start_errors=(0, 0)).fit(p, y)  # the same sequence twice, at 0.95 each
    assert split.expected_coverage_ <= single.expected_coverage_ and split.bound_ >= 0.9
    assert SelectivePolicy(0.9, 0.95, start_errors=0).fit(p, y).t_success_ == split.t_success_
    with pytest.raises(ValueError, match="start_errors"):
        SelectivePolicy(start_errors=(-1,)).fit(p, y)
