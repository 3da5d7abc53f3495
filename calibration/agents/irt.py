"""Agent ability and scenario difficulty, measured jointly: a 1PL/2PL item-response model on noisy labels.

A raw success share per scenario mixes the scenario with the agents that ran it, and a raw rate per agent
mixes the agent with the scenarios it drew. The item-response model separates them:
``P(success | agent a, scenario s) = sigmoid(alpha_s * (theta_a - b_s))``: ability ``theta_a``,
difficulty ``b_s`` (both in log-odds; ``b = 0`` is the average scenario, ``theta_a`` the log-odds of
success on it), discrimination ``alpha_s`` (1 in the 1PL model). Labels are not the truth: each comes
with the sensitivity and specificity of its source (gold references 1 and 1; annotators and the
autorater as measured on the references), and the likelihood is that of the *label*,
``P(label = 1) = (1 - sp) + (se + sp - 1) * P(success)``, so a noisy source says less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from .._checks import as_binary, as_float, check_fitted, same_length

_EPS = 1e-12


@dataclass(eq=False)
class ItemResponseModel:
    """Joint maximum a posteriori fit of abilities and difficulties, with Laplace (normal) intervals.

    Priors: ``theta ~ N(0, ability_prior_sd^2)`` (broad: agents are few and have many labels),
    ``b ~ N(0, sd_b^2)`` with ``sd_b`` estimated from the data (empirical Bayes: a few rounds of
    ``sd_b^2 = mean(b^2 + var(b))``), and in 2PL ``log alpha ~ N(0, discrimination_prior_sd^2)``. The prior
    on b centres the scale (the model cannot tell "all agents better" from "all scenarios easier"). The
    intervals are ``estimate +- z * se`` with the standard errors from the inverse of the expected
    information plus the prior precision at the optimum (a Laplace approximation to the posterior);
    on simulated suites they cover the true values at about the stated level (tests).

    Args:
        model: ``"1pl"`` or ``"2pl"``.
        ability_prior_sd: prior sd of abilities (log-odds).
        difficulty_prior_sd: prior sd of difficulties; None: estimated (empirical Bayes).
        discrimination_prior_sd: prior sd of log discrimination (2PL only).
        level: level of the intervals.
        eb_rounds: rounds of the empirical-Bayes update of the difficulty sd.
        max_iter: optimiser iterations per round.

    Attributes:
        agents_, scenarios_: (A,), (S,) the ids, in the order of the arrays below.
        ability_, ability_se_: (A,) estimates and standard errors.
        difficulty_, difficulty_se_: (S,) estimates and standard errors (higher: harder).
        discrimination_: (S,) (ones in 1PL).
        difficulty_sd_: the prior sd of difficulties used in the last round.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> theta, b = np.array([-1.0, 0.0, 1.5]), rng.normal(0, 1, 60)
        >>> a, s = np.repeat(np.arange(3), 60 * 4), np.tile(np.repeat(np.arange(60), 4), 3)
        >>> y = (rng.random(a.size) < 1 / (1 + np.exp(-(theta[a] - b[s])))).astype(int)
        >>> irt = ItemResponseModel().fit([f"agent{i}" for i in a], [f"s{j}" for j in s], y)
        >>> [str(name) for _, name in sorted(zip(irt.ability_, irt.agents_))]
        ['agent0', 'agent1', 'agent2']
        >>> lo, hi = irt.ability_interval().T
        >>> bool(np.all(lo < irt.ability_) and np.all(irt.ability_ < hi))
        True
    """

    model: str = "1pl"
    ability_prior_sd: float = 3.0
    difficulty_prior_sd: float | None = None
    discrimination_prior_sd: float = 0.5
    level: float = 0.95
    eb_rounds: int = 5
    max_iter: int = 500

    def fit(self, agents, scenarios, labels, sensitivity=None, specificity=None, weights=None) -> ItemResponseModel:
        """Fits abilities and difficulties to labels.

        Args:
            agents: (n,) agent id of each label.
            scenarios: (n,) scenario id of each label.
            labels: (n,) 0/1 labels, 1 = success.
            sensitivity: (n,) P(label success | true success) of each label's source (default 1: gold).
            specificity: (n,) P(label failure | true failure) of each label's source (default 1).
            weights: (n,) weight of each label in the likelihood (default 1).

        Returns:
            self.
        """
        if self.model not in ("1pl", "2pl"):
            raise ValueError(f"model must be '1pl' or '2pl', got {self.model!r}")
        y = as_binary(labels, "labels")
        n = same_length(agents=list(agents), scenarios=list(scenarios), labels=y)
        se = np.ones(n) if sensitivity is None else as_float(sensitivity, "sensitivity")
        sp = np.ones(n) if specificity is None else as_float(specificity, "specificity")
        w = np.ones(n) if weights is None else as_float(weights, "weights")
        same_length(labels=y, sensitivity=se, specificity=sp, weights=w)
        if np.any(se + sp - 1 <= 0):
            raise ValueError("every source needs sensitivity + specificity > 1 (labels that carry information); "
                             "leave uninformative labels out")
        self.agents_, a = np.unique(np.asarray(agents).astype(str), return_inverse=True)
        self.scenarios_, s = np.unique(np.asarray(scenarios).astype(str), return_inverse=True)
        A, S = len(self.agents_), len(self.scenarios_)
        data = (a, s, y, se, sp, w)
        x = np.zeros(A + S + (S if self.model == "2pl" else 0))
        sd_b = self.difficulty_prior_sd or 1.0
        for _ in range(1 if self.difficulty_prior_sd else max(1, self.eb_rounds)):
            precision = self._prior_precision(A, S, sd_b)
            result = optimize.minimize(self._objective, x, args=(data, precision, A, S), jac=True, method="L-BFGS-B",
                                       options={"maxiter": self.max_iter})
            x = result.x
            variance = self._posterior_variance(x, data, precision, A, S)
            if not self.difficulty_prior_sd:
                b, var_b = x[A:A + S], variance[A:A + S]
                sd_b = float(np.sqrt(np.mean(b ** 2 + var_b)))
        self.difficulty_sd_ = sd_b
        self.ability_, self.difficulty_ = x[:A], x[A:A + S]
        self.ability_se_, self.difficulty_se_ = np.sqrt(variance[:A]), np.sqrt(variance[A:A + S])
        self.discrimination_ = np.exp(x[A + S:]) if self.model == "2pl" else np.ones(S)
        return self

    def ability_interval(self) -> np.ndarray:
        """(A, 2) [low, high] of each ability at ``level``."""
        check_fitted(self, "ability_")
        z = stats.norm.ppf(0.5 + self.level / 2)
        return np.stack([self.ability_ - z * self.ability_se_, self.ability_ + z * self.ability_se_], 1)

    def difficulty_interval(self) -> np.ndarray:
        """(S, 2) [low, high] of each difficulty at ``level``."""
        check_fitted(self, "difficulty_")
        z = stats.norm.ppf(0.5 + self.level / 2)
        return np.stack([self.difficulty_ - z * self.difficulty_se_, self.difficulty_ + z * self.difficulty_se_], 1)

    def predict_proba(self, agents, scenarios) -> np.ndarray:
        """(n,) P(true success) of each agent on each scenario, including pairs that never ran.

        A scenario the model has not seen is an average one drawn from the prior ``N(0, difficulty_sd_^2)``
        (the probit approximation of the logistic-normal mean). An unknown agent is an error.
        """
        check_fitted(self, "ability_")
        agents, scenarios = np.asarray(agents).astype(str), np.asarray(scenarios).astype(str)
        same_length(agents=agents, scenarios=scenarios)
        a = np.searchsorted(self.agents_, agents)
        known_a = (a < len(self.agents_)) & (self.agents_[np.minimum(a, len(self.agents_) - 1)] == agents)
        if not known_a.all():
            raise ValueError(f"unknown agents {sorted(set(agents[~known_a]))[:3]}: fit the model on labels of them "
                             "first")
        s = np.minimum(np.searchsorted(self.scenarios_, scenarios), len(self.scenarios_) - 1)
        known_s = self.scenarios_[s] == scenarios
        theta = self.ability_[a]
        eta = np.where(known_s, self.discrimination_[s] * (theta - self.difficulty_[s]),
                       theta / np.sqrt(1 + np.pi * self.difficulty_sd_ ** 2 / 8))
        return special.expit(eta)

    def log_likelihood(self, agents, scenarios, outcomes) -> float:
        """Mean log-likelihood of true outcomes (e.g. held out), for comparing with other predictors."""
        p = np.clip(self.predict_proba(agents, scenarios), _EPS, 1 - _EPS)
        y = as_binary(outcomes, "outcomes")
        return float(np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))

    # -- internals ---------------------------------------------------------------------------------

    def _prior_precision(self, A: int, S: int, sd_b: float) -> np.ndarray:
        precision = [np.full(A, self.ability_prior_sd ** -2.0), np.full(S, sd_b ** -2.0)]
        if self.model == "2pl":
            precision.append(np.full(S, self.discrimination_prior_sd ** -2.0))
        return np.concatenate(precision)

    def _eta(self, x, a, s, A: int, S: int):
        """Linear predictor and its partial derivatives in (theta_a, b_s, log alpha_s), each (n,)."""
        theta, b = x[:A][a], x[A:A + S][s]
        alpha = np.exp(x[A + S:][s]) if self.model == "2pl" else np.ones_like(theta)
        gap = theta - b
        return alpha * gap, alpha, -alpha, alpha * gap

    def _objective(self, x, data, precision, A: int, S: int):
        a, s, y, se, sp, w = data
        eta, d_theta, d_b, d_log_alpha = self._eta(x, a, s, A, S)
        p = special.expit(eta)
        j = se + sp - 1
        q = np.clip((1 - sp) + j * p, _EPS, 1 - _EPS)  # P(label = 1)
        loglik = np.sum(w * (y * np.log(q) + (1 - y) * np.log(1 - q)))
        d_eta = w * (y / q - (1 - y) / (1 - q)) * j * p * (1 - p)
        grad = np.zeros_like(x)
        np.add.at(grad, a, d_eta * d_theta)
        np.add.at(grad, A + s, d_eta * d_b)
        if self.model == "2pl":
            np.add.at(grad, A + S + s, d_eta * d_log_alpha)
        return -loglik + 0.5 * np.sum(precision * x ** 2), -grad + precision * x

    def _posterior_variance(self, x, data, precision, A: int, S: int) -> np.ndarray:
        """(P,) diagonal of the inverse of (expected information + prior precision), by blocks.

        Abilities form a small dense block; each scenario's parameters (b, and log alpha in 2PL) a k x k
        block of their own; agents and scenarios meet only in the cross block. The inverse comes from the
        Schur complement on the abilities: O(A^2 S) instead of a dense (A + kS)^3 inversion.
        """
        a, s, y, se, sp, w = data
        eta, d_theta, d_b, d_log_alpha = self._eta(x, a, s, A, S)
        p = special.expit(eta)
        q = np.clip((1 - sp) + (se + sp - 1) * p, _EPS, 1 - _EPS)
        info = w * ((se + sp - 1) * p * (1 - p)) ** 2 / (q * (1 - q))  # (n,) Fisher information in eta
        g = np.stack([d_b] + ([d_log_alpha] if self.model == "2pl" else []), 1)  # (n, k) scenario gradients
        k = g.shape[1]
        h_aa = np.bincount(a, info * d_theta ** 2, minlength=A) + precision[:A]  # (A,) diagonal
        block = np.zeros((S, k, k))  # (S, k, k)
        np.add.at(block, s, info[:, None, None] * g[:, :, None] * g[:, None, :])
        prior_s = np.stack([precision[A:A + S]] + ([precision[A + S:]] if k == 2 else []), 1)  # (S, k)
        block[:, np.arange(k), np.arange(k)] += prior_s
        cross = np.zeros((A, S, k))  # (A, S, k)
        np.add.at(cross, (a, s), (info * d_theta)[:, None] * g)
        block_inv = np.linalg.inv(block)  # (S, k, k)
        cb = np.einsum("ask,skl->asl", cross, block_inv)  # (A, S, k)
        schur_inv = np.linalg.inv(np.diag(h_aa) - np.einsum("asl,bsl->ab", cb, cross))  # (A, A)
        var_s = np.einsum("skk->sk", block_inv) + np.einsum("asl,ab,bsl->sl", cb, schur_inv, cb)  # (S, k)
        return np.concatenate([np.diag(schur_inv), var_s[:, 0]] + ([var_s[:, 1]] if k == 2 else []))


__all__ = ["ItemResponseModel"]
