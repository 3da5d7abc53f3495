"""Certify a new suite version on its own audit, stratum by stratum.

The selective policy (``SelectivePolicy``) states an agreement that holds for episodes drawn like its references.
A new suite version brings new tasks, cameras and agents, where that promise silently breaks. Here the version's
own evidence decides: a uniform random *audit* of each stratum's provisional auto-labels is answered by humans,
and a stratum is certified only where that evidence shows the target agreement.

Per stratum, with the reference-fitted threshold ``t`` (the provisional auto-labels are the episodes with
``max(p, 1 - p) >= t``) and its reference evidence (``k_ref`` auto-labelled references, ``e_ref`` of them wrong):

1. *Pooled* (the version looks like the references). When the stratum is known (its key occurs among the
   references and its inputs did not drift from theirs) and its audit does not contradict the references (a
   one-sided Fisher exact test that the audit errs more often, ``consistency_alpha``), the references and the
   audit count together: the Clopper-Pearson lower bound on ``(n + k, e + e_ref k / k_ref)``, the references
   weighted down to ``k = min(k_ref, reference_weight * n)``. (Serving certifies the known strata of a version as
   one group this way, so ``n`` is the whole known audit.)
2. *Audit alone* (a new or drifted stratum, or a contradicted one). Only the audit counts, by the same
   Learn-then-Test procedure as the references': the thresholds tried are the audited episodes' own confidences
   (fixed by the scores before any human answered), strictest first, each tested by its exact binomial bound, up
   to the first failure. The stratum is certified at the least strict threshold that passes: the reference's
   ``t`` or a stricter one.
3. Neither passes: nothing of the stratum is auto-labelled; :func:`audits_needed` says how many more audits, all
   agreeing, would certify it.

The guarantee of (2) is exact for each stratum: the audit is a uniform sample of the stratum's provisional
auto-labels, so given the path its errors are binomial and the certified agreement holds with probability at
least ``confidence`` over the audit draw, whatever the references say. (1) adds the references' power where the
version is exchangeable with them, which the drift and consistency checks test but cannot prove; the benchmark
(``benchmarks/certify.py``) measures the coverage of the whole procedure on shifted versions.

Example:
    >>> import numpy as np
    >>> conf = np.full(40, 0.99)                       # 40 audited auto-labels of a new task
    >>> wrong = np.zeros(40, dtype=bool)
    >>> certify_stratum(conf, wrong, 0.9, None, known=False, target=0.9, confidence=0.9)["certified"]
    True
    >>> wrong[:8] = True                               # the model is wrong on 8 of them: 0.80
    >>> certify_stratum(conf, wrong, 0.9, None, known=False, target=0.9, confidence=0.9)["certified"]
    False
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._checks import as_float
from .selective import SelectivePolicy, agreement_lower_bound, certifying_size


def audit_size(target: float, confidence: float, errors: int = 0) -> int:
    """The smallest audit that can certify ``target`` at ``confidence`` with ``errors`` wrong among its labels
    (0: when the model is right on all of them; 45 at 0.95 / 90%, 22 at 0.90 / 90%)."""
    return certifying_size(target, confidence, errors)


def audits_needed(n: int, errors: int, target: float, confidence: float) -> int:
    """How many more audited labels, all agreeing, would certify a stratum with ``errors`` wrong of ``n``."""
    return max(0, certifying_size(target, confidence, errors) - n)


def consistency_pvalue(audit_errors: int, audit_n: int, ref_errors: int, ref_n: int) -> float:
    """One-sided Fisher exact p-value that the audit's error rate exceeds the references' (1.0 without data)."""
    if audit_n == 0 or ref_n == 0:
        return 1.0
    table = [[audit_errors, audit_n - audit_errors], [ref_errors, ref_n - ref_errors]]
    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def certify_stratum(audit_confidence, audit_wrong, threshold: float, reference: tuple[int, int] | None, *,
                    known: bool, target: float, confidence: float, consistency_alpha: float = 0.2,
                    reference_weight: float = 4.0) -> dict:
    """The certification of one stratum from its answered audit (the module docstring gives the procedure).

    Args:
        audit_confidence: (n,) ``max(p, 1 - p)`` of the audited provisional auto-labels.
        audit_wrong: (n,) True where the model's outcome differs from the humans'.
        threshold: the reference-fitted confidence threshold ``t`` (every audited episode has confidence >= t).
        reference: ``(k_ref, e_ref)``, the references auto-labelled at ``t`` and how many of them were wrong;
            None when the calibration has no such evidence.
        known: the stratum occurs among the references and its inputs did not drift from theirs.
        target: the agreement to certify.
        confidence: the probability that a certified stratum's agreement reaches ``target``.
        consistency_alpha: the level of the test that the audit contradicts the references (a high level: a
            false alarm only costs the references' help, a missed shift costs the promise).
        reference_weight: the references count as at most this many times the audit's size in the pooled bound, so
            that a shift too small for the audit to see cannot hide behind them.

    Returns:
        ``evidence`` ("pooled", "audit" or "none"), ``certified``, ``threshold`` (the confidence at or above which
        the stratum is auto-labelled; None when not certified), ``bound`` (the lower confidence bound on its
        agreement), ``audit_n``, ``audit_errors``, ``consistency_p`` and ``audits_needed``.
    """
    conf, wrong = as_float(audit_confidence, "audit_confidence"), np.asarray(audit_wrong, dtype=bool)
    n, e = int(conf.size), int(wrong.sum())
    out = {"audit_n": n, "audit_errors": e, "consistency_p": None, "evidence": "none", "certified": False,
           "threshold": None, "bound": None, "audits_needed": audits_needed(n, e, target, confidence)}
    if reference is not None and known:
        k_ref, e_ref = reference
        out["consistency_p"] = p_value = consistency_pvalue(e, n, e_ref, k_ref)
        if p_value >= consistency_alpha and k_ref:
            k_eff = min(float(k_ref), reference_weight * n)
            bound = agreement_lower_bound(e + e_ref * k_eff / k_ref, n + k_eff, confidence)
            if bound >= target:
                return {**out, "evidence": "pooled", "certified": True, "threshold": float(threshold),
                        "bound": bound, "audits_needed": 0}
    if n == 0:
        return out
    fitted = _audit_policy(conf, wrong, target, confidence)
    if fitted.feasible_:
        return {**out, "evidence": "audit", "certified": True, "threshold": max(float(threshold), fitted.t_success_),
                "bound": float(fitted.bound_), "audits_needed": 0}
    return out


def _audit_policy(conf: np.ndarray, wrong: np.ndarray, target: float, confidence: float) -> SelectivePolicy:
    """Learn-then-Test on the audit alone: the path is the audited episodes' confidences (strictest first), fixed
    before their labels; each point's planned count is exactly the audited episodes it keeps."""
    path = np.unique(conf)[::-1]
    planned = (conf[None, :] >= path[:, None]).sum(1)
    # the episodes stand as p = confidence with y = 1 where the model is right: max(p, 1 - p) is the confidence
    y = (~wrong).astype(int)
    return SelectivePolicy(target_agreement=target, confidence=confidence, min_references=0, start_errors=0,
                           on_infeasible="route_all").fit(conf, y, thresholds=path, planned_counts=planned)


__all__ = ["audit_size", "audits_needed", "certify_stratum", "consistency_pvalue"]
