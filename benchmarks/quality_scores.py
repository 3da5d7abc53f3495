"""The quality benchmark's scores beyond one report per held-out set: swap pairs, both unseen-scenario draws pooled,
failure modes pooled, the calibration fitted on the training suite's references and the selective policy it gives
on each held-out set."""

from __future__ import annotations


def swap_pairs(original: list[dict], swapped: list[dict], original_suite, swapped_suite) -> dict:
    """The swap test that an instruction-blind rater cannot pass: on the videos that succeed under their own
    instruction and fail under the swapped one (``swap_instructions`` keeps the continuation ids), the share
    rated a success under the first and a failure under the second (``both_right``: a rater that ignores the
    words answers both alike, so it scores 0), and the share whose P(success) drops under the swap."""
    from autorater.data.suite import load_truth

    before = {t["continuation_id"]: t["outcome"] for t in load_truth(original_suite.root)}
    after = {t["continuation_id"]: t["outcome"] for t in load_truth(swapped_suite.root)}
    a = {r["continuation_id"]: r for r in original if "error" not in r}
    b = {r["continuation_id"]: r for r in swapped if "error" not in r}
    ids = [c for c in after if after[c] == "failure" and before.get(c) == "success" and c in a and c in b]
    if not ids:
        return {"n": 0, "both_right": None, "p_drops": None}
    right = sum(a[c]["outcome"] == "success" and b[c]["outcome"] == "failure" for c in ids)
    drops = sum(b[c]["p_success"] < a[c]["p_success"] for c in ids)
    return {"n": len(ids), "both_right": right / len(ids), "p_drops": drops / len(ids)}


def pooled_outcome(scored: list[tuple[list[dict], object]], keep=None) -> dict:
    """Outcome metrics of one method's predictions on several suites pooled, against each suite's simulator
    truth (the two draws of unseen scenarios: one estimate on 800 continuations), and the AUROC of its score (the
    logit, else P(success)), with 95% bootstrap intervals of both over scenarios (a scenario's continuations
    resampled together). ``keep(truth line)``: only the continuations it accepts (one task, a group of tasks)."""
    import numpy as np

    from autorater.calibration.metrics import auroc, bootstrap_ci, outcome_metrics
    from autorater.data.suite import load_truth

    gold, pred, score, groups = [], [], [], []
    for rows, suite in scored:
        truth = {t["continuation_id"]: t for t in load_truth(suite.root)}
        for r in rows:
            t = truth.get(r["continuation_id"]) if "error" not in r else None
            if t is not None and (keep is None or keep(t)):
                gold.append(t["outcome"] == "success")
                pred.append(r["outcome"] == "success")
                score.append(float(r.get("logit", r.get("p_success", float("nan")))))  # no score: no AUROC
                groups.append(f"{suite.info.version}/{t.get('scenario_id', r['continuation_id'])}")
    out = {**outcome_metrics(gold, pred), "auroc": auroc(gold, score) if gold else float("nan"),
           "suites": [s.info.version for _, s in scored]}
    if gold:
        def both(g, p, z):
            return np.array([outcome_metrics(g, p)["balanced_accuracy"], auroc(g, z)])

        _, lo, hi = bootstrap_ci(both, np.array(gold), np.array(pred), np.array(score), groups=groups, n_boot=500)
        out["balanced_accuracy_ci95"] = [float(lo[0]), float(hi[0])]
        out["auroc_ci95"] = [float(lo[1]), float(hi[1])]
    return out


def by_relatives(scored: list[tuple[list[dict], object]], train_suites: list) -> dict:
    """Unseen tasks split by whether a relative (a task of their family, Meta-World's ``tasks.FAMILIES``) is among
    the training suites' tasks: ``pooled_outcome`` per task and per group (``with_relatives``,
    ``without_relatives``). ``scored``: (prediction rows, held-out suite) of the unseen-task sets."""
    from autorater.data.suite import load_truth
    from autorater.data.worlds.metaworld.tasks import relatives_in

    trained = sorted({s.metadata.get("task") for suite in train_suites for s in suite.scenarios} - {None})
    tasks = sorted({t["task"] for _, suite in scored for t in load_truth(suite.root)})
    relatives = {task: list(relatives_in(task, trained)) for task in tasks}
    per_task = {task: {**pooled_outcome(scored, keep=lambda t, task=task: t["task"] == task),
                       "relatives": relatives[task]} for task in tasks}
    out = {"training_tasks": trained}
    for name, has in (("with_relatives", True), ("without_relatives", False)):
        chosen = {task for task in tasks if bool(relatives[task]) == has}
        if chosen:
            out[name] = {**pooled_outcome(scored, keep=lambda t, chosen=chosen: t["task"] in chosen),
                         "tasks": sorted(chosen)}
    out["per_task"] = per_task
    return out


def pooled_failure_modes(scored: list[tuple[list[dict], object]]) -> dict:
    """Failure-mode accuracy and confusion of one method on several suites pooled, against the simulator truth,
    among true failures predicted as failures, overall and per category (``evaluate.failure_mode_score``)."""
    import numpy as np
    import pandas as pd

    from autorater.data.suite import load_truth
    from autorater.training.evaluate import failure_mode_score

    true_mode, pred_mode, y, yhat, category = [], [], [], [], []
    for rows, suite in scored:
        truth = {t["continuation_id"]: t for t in load_truth(suite.root)}
        for r in rows:
            if "error" not in r and r["continuation_id"] in truth:
                t = truth[r["continuation_id"]]
                true_mode.append(t.get("failure_mode"))
                pred_mode.append(r.get("failure_mode"))
                y.append(int(t["outcome"] == "success"))
                yhat.append(int(r["outcome"] == "success"))
                category.append(suite.scenario_by_id[suite.get(r["continuation_id"]).scenario_id].category)
    return failure_mode_score(pd.Series(true_mode, dtype=object), pd.Series(pred_mode, dtype=object), np.array(y),
                              np.array(yhat), {"category": pd.Series(category, dtype=object)})


def reference_calibration(model, suite, cache_dir: str) -> dict:
    """Temperature, marker offset and selective policy (target 0.95, confidence 0.9) fitted on the training
    suite's references (never trained on) as ``autorater calibrate`` fits them: split by scenario, the scaler
    on one part, the thresholds certified on the other (``SplitCalibrator``). The held-out sets are scored
    with and without."""
    import numpy as np

    from autorater.calibration import SplitCalibrator
    from autorater.serving.labelling.model_calibration import fit_marker_offset
    from autorater.training.baselines import predict_cached

    refs = {r.continuation_id: r for r in suite.references}
    rows = [r for r in predict_cached(model, suite, cache_dir) if r["continuation_id"] in refs and "error" not in r]
    y = np.array([refs[r["continuation_id"]].outcome == "success" for r in rows], dtype=int)
    logits = np.array([r["logit"] for r in rows])
    scenario = {c.continuation_id: c.scenario_id for c in suite.continuations}
    fitted = SplitCalibrator(0.95, 0.9, on_infeasible="route_all").fit(
        logits, y, groups=np.array([scenario[r["continuation_id"]] for r in rows]))
    marker, _, _ = fit_marker_offset(rows, refs)
    return {**fitted.scaler_.to_dict(), **marker.to_dict(), "policy": fitted.policy_.to_dict(),
            "split": fitted.split_info()}


def selective_on(rows: list[dict], suite, calibration: dict) -> dict:
    """The issue's calibration targets on a held-out suite, against the simulator truth: ECE of the raw and
    the calibrated P(success), and the share auto-labelled by the reference-fitted policy with its agreement."""
    import numpy as np

    from autorater.calibration import SelectivePolicy, TemperatureScaler, expected_calibration_error
    from autorater.data.suite import load_truth

    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(suite.root)}
    ok = [r for r in rows if "error" not in r and r["continuation_id"] in truth]
    y = np.array([truth[r["continuation_id"]] for r in ok], dtype=int)
    logits = np.array([r["logit"] for r in ok])
    p = TemperatureScaler.from_dict(calibration).predict_proba(logits)
    out = {"n": len(ok), "ece_raw": expected_calibration_error(1 / (1 + np.exp(-logits)), y),
           "ece_calibrated": expected_calibration_error(p, y)}
    policy = SelectivePolicy.from_dict(calibration["policy"])
    if not policy.feasible_:
        return {**out, "coverage": 0.0, "agreement": None}
    auto = policy.decide(p) == "auto"
    agree = ((p >= 0.5).astype(int) == y)[auto]
    return {**out, "coverage": float(auto.mean()), "agreement": float(agree.mean()) if auto.any() else None}


__all__ = ["by_relatives", "pooled_failure_modes", "pooled_outcome", "reference_calibration", "selective_on",
           "swap_pairs"]


tiny = None  # it trains or builds nothing of its own (its command line is checked: tests/test_benchmark_modules.py)
