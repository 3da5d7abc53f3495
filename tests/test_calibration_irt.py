"""Agent ability and scenario difficulty: intervals cover the simulated truth; held-out labels beat raw rates."""

import numpy as np
import pytest

from autorater.calibration.agents.irt import ItemResponseModel
from blas_threads import one_blas_thread  # noqa: F401 - autouse fixture


def simulate(rng, n_agents=8, n_scenarios=100, per_pair=2, model="1pl"):
    """Abilities N(0, 1), difficulties N(0, 1.2^2); every agent runs every scenario ``per_pair`` times."""
    theta, b = rng.normal(0, 1, n_agents), rng.normal(0, 1.2, n_scenarios)
    alpha = np.exp(rng.normal(0, 0.3, n_scenarios)) if model == "2pl" else np.ones(n_scenarios)
    a = np.repeat(np.arange(n_agents), n_scenarios * per_pair)
    s = np.tile(np.repeat(np.arange(n_scenarios), per_pair), n_agents)
    y = (rng.random(a.size) < 1 / (1 + np.exp(-alpha[s] * (theta[a] - b[s])))).astype(int)
    return theta, b, [f"a{i:02d}" for i in a], [f"s{j:03d}" for j in s], y  # zero-padded: sorted ids = index order


def coverage(fitted, theta, b):
    lo_a, hi_a = fitted.ability_interval().T
    lo_b, hi_b = fitted.difficulty_interval().T
    return np.mean((lo_a <= theta) & (theta <= hi_a)), np.mean((lo_b <= b) & (b <= hi_b))


def test_abilities_and_difficulties_cover_the_simulated_truth():
    rng = np.random.default_rng(0)
    results = []
    for _ in range(8):
        theta, b, agents, scenarios, y = simulate(rng)
        results.append(coverage(ItemResponseModel().fit(agents, scenarios, y), theta, b))
    ability, difficulty = np.mean(results, axis=0)
    assert ability >= 0.85  # 64 intervals at 95%
    assert 0.9 <= difficulty <= 0.98  # 800 intervals at 95%


def test_labels_with_known_error_rates_are_corrected_and_ignoring_the_noise_is_not():
    rng = np.random.default_rng(1)
    fair, naive = [], []
    for _ in range(6):
        theta, b, agents, scenarios, y = simulate(rng, n_scenarios=80)
        auto = rng.random(y.size) < 0.7  # 70% labelled by a noisy source, the rest by careful annotators
        se, sp = np.where(auto, 0.85, 0.97), np.where(auto, 0.8, 0.95)
        labels = np.where(y == 1, rng.random(y.size) < se, rng.random(y.size) > sp).astype(int)
        fair.append(coverage(ItemResponseModel().fit(agents, scenarios, labels, se, sp), theta, b)[0])
        naive.append(coverage(ItemResponseModel().fit(agents, scenarios, labels), theta, b)[0])
    assert np.mean(fair) >= 0.85 and np.mean(naive) < 0.7  # noise pulls every ability towards the middle


def test_held_out_log_likelihood_beats_the_raw_rates_and_unseen_pairs_are_predicted():
    rng = np.random.default_rng(2)
    theta, b, agents, scenarios, y = simulate(rng, n_scenarios=150)
    agents, scenarios = np.array(agents), np.array(scenarios)
    test = rng.random(y.size) < 0.2
    fitted = ItemResponseModel().fit(agents[~test], scenarios[~test], y[~test])

    def raw(keys):  # the share of successes per agent (or per scenario) on the training labels, smoothed
        rate = {k: (y[~test][keys[~test] == k].sum() + 1) / ((keys[~test] == k).sum() + 2) for k in set(keys)}
        p = np.array([rate[k] for k in keys[test]])
        return np.mean(y[test] * np.log(p) + (1 - y[test]) * np.log(1 - p))

    irt = fitted.log_likelihood(agents[test], scenarios[test], y[test])
    assert irt > raw(agents) + 0.05 and irt > raw(scenarios)
    never_run = fitted.predict_proba(["a00", "a07"], ["unseen-scenario", "unseen-scenario"])  # an average scenario
    assert (never_run[0] < never_run[1]) == (fitted.ability_[0] < fitted.ability_[7])
    with pytest.raises(ValueError, match="unknown agents"):
        fitted.predict_proba(["nobody"], ["s000"])


def test_the_2pl_model_fits_discriminations_and_ranks_agents():
    rng = np.random.default_rng(3)
    theta, b, agents, scenarios, y = simulate(rng, n_scenarios=60, per_pair=4, model="2pl")
    fitted = ItemResponseModel(model="2pl").fit(agents, scenarios, y)
    assert (fitted.discrimination_ > 0).all() and fitted.discrimination_.std() > 0
    assert np.corrcoef(fitted.ability_, theta)[0, 1] > 0.9
    assert (fitted.ability_interval()[:, 1] > fitted.ability_interval()[:, 0]).all()
    with pytest.raises(ValueError, match="sensitivity"):
        ItemResponseModel().fit(agents, scenarios, y, np.full(y.size, 0.5), np.full(y.size, 0.5))
