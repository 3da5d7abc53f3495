"""Active learning: which continuations should the annotators label next, and a round that may replace the champion.

``select``: score the unlabelled continuations of a pool suite with the model and pick ``budget`` of
them by a strategy, spread across scenarios and categories so that a batch is not ``budget``
near-copies of one hard scenario.

Strategies (higher score = asked first):

- ``uncertainty``: least confidence, ``1 - max(p, 1 - p)``.
- ``margin``: ``1 - |p - (1 - p)|``. For one binary outcome it ranks exactly like ``uncertainty``
  (both are monotone in ``|p - 0.5|``); it is kept because it is the name teams look for.
- ``entropy``: the outcome's binary entropy plus the marker's uncertainty (the spread of the
  predicted marker distribution as a share of the video), so that "when" counts as well as "whether".
- ``random``: the baseline every strategy must beat.
- ``balanced``: ``uncertainty`` within each predicted class, with a quota per class that moves the
  labelled set towards half successes, half failures (``class_balanced_top``). Plain uncertainty drew
  batches that were 77% successes on BabyAI, the class the labelled set already held most of, and
  they carried twice the label noise.

``run_round``: ingest the new labels into the pool suite, train a challenger (fine-tuned from the
champion, or from scratch), calibrate it on some of the references, and judge champion and challenger
on references *neither was calibrated on*: the challenger is calibrated on the references the
champion's ``calibration.json`` records (the same footing), or, when it records none, on a share of the
reference scenarios (``calibration_share``) that then never judge. The judgement is a paired
comparison (``autorater.calibration.paired_comparison``: a bootstrap over scenarios of the difference in
balanced accuracy, McNemar beside it); the challenger is promoted to ``champion`` only when the
``level`` interval of the difference lies above ``margin``. Both models, the difference and its
interval go to MLflow (metrics ``round.comparison.*`` on the challenger's run) and to ``round.json``.

Example:
    >>> chosen = active_select("model", Suite.load("pool"), budget=100, out="queue-1")   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np

from autorater.data.files import write_text_atomic
from autorater.data.suite import Suite
from autorater.device import DEFAULT_DEVICE

STRATEGIES = ("uncertainty", "margin", "entropy", "random", "balanced")


def acquisition_scores(p, marker_spread_s=None, duration_s=None, strategy: str = "uncertainty",
                       rng: np.random.Generator | None = None) -> np.ndarray:
    """(n,) scores, higher first. ``p``: calibrated P(success); marker spread and duration in seconds."""
    p = np.clip(np.asarray(p, dtype=float), 1e-9, 1 - 1e-9)
    if strategy in ("uncertainty", "balanced"):  # balanced: the same scores, drawn per class
        return 1 - np.maximum(p, 1 - p)
    if strategy == "margin":
        return 1 - np.abs(2 * p - 1)
    if strategy == "entropy":
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
        if marker_spread_s is None or duration_s is None:
            return h
        share = np.asarray(marker_spread_s, float) / np.maximum(np.asarray(duration_s, float), 1e-6)
        return h + np.nan_to_num(np.clip(share, 0, 1))
    if strategy == "random":
        return (rng or np.random.default_rng(0)).random(len(p))
    raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def diverse_top(scores: np.ndarray, scenario: list[str], category: list[str], budget: int) -> list[int]:
    """Indices of ``budget`` high scorers: first at most one per scenario, categories taken in turn, then the rest.

    Round-robin over categories (each in score order, one continuation per scenario) keeps a batch
    from being one category's near-copies; leftovers fill by score when the pool runs out of variety.
    """
    order = np.argsort(-np.asarray(scores), kind="stable")
    by_cat: dict[str, list[int]] = {}
    for i in order:
        by_cat.setdefault(category[i], []).append(int(i))
    chosen, used_scenarios, taken = [], set(), set()
    queues = {c: list(v) for c, v in by_cat.items()}
    while len(chosen) < budget and any(queues.values()):
        progressed = False
        for cat in sorted(queues, key=lambda c: -scores[queues[c][0]] if queues[c] else 0):
            while queues[cat] and scenario[queues[cat][0]] in used_scenarios:
                queues[cat].pop(0)
            if queues[cat] and len(chosen) < budget:
                i = queues[cat].pop(0)
                chosen.append(i)
                taken.add(i)
                used_scenarios.add(scenario[i])
                progressed = True
        if not progressed:
            break
    for i in order:  # fewer scenarios than the budget: fill by score
        if len(chosen) >= budget:
            break
        if int(i) not in taken:
            chosen.append(int(i))
            taken.add(int(i))
    return chosen


def class_balanced_top(scores, p, budget: int, labelled: tuple[int, int] = (0, 0), pick=None) -> list[int]:
    """Indices of ``budget`` high scorers, split between predicted successes and predicted failures so that the
    labelled set moves towards half of each.

    The quota of predicted successes is ``(n_labelled + budget) / 2 - n_success_labelled``, clipped to
    [0, budget]; each class is ranked by its own scores (``pick(indices, k)`` chooses k of them, e.g. with
    ``diverse_top``; default: by score), and a class that runs short leaves its places to the other.

    Args:
        scores: (n,) acquisition scores, higher first.
        p: (n,) P(success): ``p >= 0.5`` is a predicted success.
        budget: how many to choose.
        labelled: (successes, failures) already labelled.
        pick: ``pick(indices, k) -> list of k of them``.
    """
    scores, p = np.asarray(scores, float), np.asarray(p, float)
    pick = pick or (lambda idx, k: [int(i) for i in idx[np.argsort(-scores[idx], kind="stable")][:k]])
    n_success, n_failure = labelled
    quota = int(np.clip(round((n_success + n_failure + budget) / 2 - n_success), 0, budget))
    success, failure = np.flatnonzero(p >= 0.5), np.flatnonzero(p < 0.5)
    take_success = min(quota, success.size)
    take_failure = min(budget - take_success, failure.size)
    take_success = min(budget - take_failure, success.size)  # failures ran short: successes fill in
    return pick(success, take_success) + pick(failure, take_failure)


def select(rows: list[dict], budget: int, strategy: str = "uncertainty", diversity: bool = True,
           seed: int = 0, labelled: tuple[int, int] = (0, 0)) -> list[str]:
    """Continuation ids to label next, from prediction rows with ``p_success``, ``marker_spread_s``,
    ``duration_s``, ``scenario_id`` and ``category``; ``labelled`` (successes, failures) already labelled
    sets the class quotas of ``balanced``."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    rows = [r for r in rows if r.get("p_success") is not None]
    if not rows:
        return []
    rng = np.random.default_rng(seed)
    scores = acquisition_scores([r["p_success"] for r in rows], [r.get("marker_spread_s", np.nan) for r in rows],
                                [r.get("duration_s", np.nan) for r in rows], strategy, rng)
    scenario, category = [r["scenario_id"] for r in rows], [r["category"] for r in rows]
    if strategy == "balanced":
        def pick(idx, k):
            if not diversity or k == 0:
                return [int(i) for i in idx[np.argsort(-scores[idx], kind="stable")][:k]]
            return [int(idx[j]) for j in diverse_top(scores[idx], [scenario[i] for i in idx],
                                                     [category[i] for i in idx], k)]

        idx = class_balanced_top(scores, [r["p_success"] for r in rows], budget, labelled, pick)
    elif diversity:
        idx = diverse_top(scores, scenario, category, budget)
    else:
        idx = list(np.argsort(-scores, kind="stable")[:budget])
    return [rows[i]["continuation_id"] for i in idx]


def unlabelled(suite: Suite) -> list[str]:
    """Continuations with no annotation that are not reference episodes."""
    labelled = {a.continuation_id for a in suite.annotations} | {r.continuation_id for r in suite.references}
    return [c for c in suite.continuation_ids() if c not in labelled]


def active_select(model_dir: str | os.PathLike, pool: Suite, budget: int, out: str | os.PathLike,
                  strategy: str = "uncertainty", diversity: bool = True, seed: int = 0,
                  video_url_prefix: str | None = None, progress: bool = False, device: str = DEFAULT_DEVICE,
                  allow_unverified: bool = False) -> dict:
    """Score the pool's unlabelled continuations (the model on ``device``), choose ``budget``, write
    ``selection.jsonl`` and the Label Studio files (``labelstudio/config.xml``, ``tasks.json``) into ``out``;
    returns a summary. ``allow_unverified``: load weights without a checksum (``Autorater.from_pretrained``)."""
    from autorater.rater import Rater
    from autorater.serving.labelling.folder import LABELSTUDIO_DIR
    from autorater.serving.labelstudio.formats import write_labelstudio_files

    model_dir, out = Path(model_dir), Path(out)
    ids = unlabelled(pool)
    if not ids:
        raise ValueError(f"pool suite {pool.root} has no unlabelled continuations left (every one is annotated "
                         f"or a reference)")
    rater = Rater.load(model_dir, device, allow_unverified=allow_unverified)
    preds = [r for r in rater.rate_suite(pool, ids=ids, progress=progress) if "error" not in r]
    from autorater.data.video import video_info

    for r in preds:
        c = pool.get(r["continuation_id"])
        r["scenario_id"], r["category"] = c.scenario_id, pool.scenario_by_id[c.scenario_id].category
        r["duration_s"] = video_info(pool.video_path(c.continuation_id)).duration_s
    votes: dict[str, list[bool]] = {}
    for a in pool.annotations:
        votes.setdefault(a.continuation_id, []).append(a.outcome == "success")
    majority = [np.mean(v) > 0.5 for v in votes.values()]
    chosen = select(preds, budget, strategy, diversity, seed, labelled=(sum(majority), len(majority) - sum(majority)))
    by_id = {r["continuation_id"]: r for r in preds}
    rows = [{**by_id[cid], "decision": "human", "audit": False, "reason": f"active:{strategy}",
             "model_outcome": by_id[cid]["outcome"], "model_marker_s": by_id[cid]["marker_s"]} for cid in chosen]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "selection.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    tasks = write_labelstudio_files(out / LABELSTUDIO_DIR, pool, rows, video_url_prefix=video_url_prefix)
    job = {"suite": str(pool.root.resolve()), "model": str(model_dir.resolve()), "strategy": strategy,
           "budget": budget, "diversity": diversity, "seed": seed}
    write_text_atomic(out / "job.json", json.dumps(job, indent=1) + "\n")
    return {"pool_unlabelled": len(ids), "selected": len(chosen), "tasks": tasks, "strategy": strategy,
            "scenarios": len({by_id[c]["scenario_id"] for c in chosen}),
            "categories": len({by_id[c]["category"] for c in chosen})}


def run_round(champion_dir: str | os.PathLike, pool_dir: str | os.PathLike, out: str | os.PathLike,
              tracking_uri: str, references_dir: str | os.PathLike | None = None,
              export: str | os.PathLike | None = None, tasks_file: str | os.PathLike | None = None,
              finetune: bool = True, epochs: int | None = None, cache_dir: str = "runs/cache", seed: int = 0,
              train_config=None, progress: bool = False, level: float = 0.95, margin: float = 0.0,
              calibration_share: float = 0.5, allow_unverified: bool = False, device: str = DEFAULT_DEVICE) -> dict:
    """One active-learning round (see the module docstring); returns what ``round.json`` holds.

    Args:
        champion_dir: the current champion's model folder.
        pool_dir: the pool suite: its annotations (the new ones appended) train the challenger.
        out: round folder (challenger model, calibration report, ``round.json``).
        tracking_uri: the MLflow store (the challenger is registered there; ``champion`` moves only if it wins).
        references_dir: suite whose references judge both models (default: the pool suite; never trained on).
        export: the annotators' answers (Label Studio export or annotations.jsonl), ingested first.
        tasks_file: the ``tasks.json`` they answered (its fps and frame counts check the markers).
        finetune: start from the champion's weights (with its architecture), else from scratch.
        epochs: training epochs (default: 10 fine-tuning, the recipe's when retraining).
        train_config: the recipe (a ``TrainConfig``; default: the standard one, with a lower learning rate and
            a short warm-up when fine-tuning); ``epochs``, ``cache_dir`` and ``seed`` override it.
        level: two-sided level of the interval of the difference in balanced accuracy.
        margin: the gain the interval's lower end must exceed for a promotion.
        calibration_share: share of the reference scenarios that calibrate the challenger when the champion's
            calibration records no references of this suite.
        device: where the models rate and the challenger trains (``autorater.device``; features stay cached on
            the CPU).
    """
    from autorater.mlflow_registry import promote
    from autorater.rater import Rater
    from autorater.serving.labelling.model_calibration import calibrate_model

    champion_dir, out = Path(champion_dir), Path(out)
    result: dict = {"champion": str(champion_dir), "finetune": finetune}
    pool = _take_labels(pool_dir, export, tasks_file, result)
    refs = Suite.load(references_dir) if references_dir else pool
    if not refs.references:
        raise ValueError(f"{refs.root} has no references.jsonl: champion and challenger are compared on gold "
                         f"references (pass --references)")
    champion = Rater.load(champion_dir, device, allow_unverified=allow_unverified)
    challenger_dir = out / "challenger"
    fit, run_id, version = _train_challenger(champion, pool, challenger_dir, tracking_uri, finetune, train_config,
                                             epochs, cache_dir, seed, device, progress)
    calibrate_on, judge_on, how = judging_split(refs, champion.calibration, calibration_share, seed)
    result["references_split"] = how
    calibrate_model(challenger_dir, refs, out / "calibration-challenger", reference_ids=calibrate_on, seed=seed,
                    device=device)
    challenger = Rater.load(challenger_dir, device)
    report, comparison, n = _judge(champion, challenger, refs, set(judge_on), cache_dir, level, margin, seed)
    promoted = comparison["better"]
    result.update(references=f"{refs.info.name}@{refs.info.version}", n_references=n,
                  training_examples=fit.n_train + fit.n_val, ba_champion=comparison["ba_a"],
                  ba_challenger=comparison["ba_b"], ba_gain=comparison["difference"], ba_gain_ci=comparison["ci"],
                  level=level, margin=margin, mcnemar_p=comparison["mcnemar_p"], challenger_version=version,
                  challenger_run=run_id, promoted=promoted,
                  rule=f"promote only if the {level:.0%} paired-bootstrap interval (over scenarios) of the "
                       f"challenger's gain in balanced accuracy, on references neither model was calibrated on, "
                       f"lies above {margin}")
    _log_round(tracking_uri, run_id, report, comparison, n, result["rule"])
    if promoted:
        result["alias"] = promote(tracking_uri, version=version)["uri"]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "round.json", json.dumps(result, indent=1, default=str) + "\n")
    return result


def _take_labels(pool_dir, export, tasks_file, result: dict) -> Suite:
    """The pool suite, with the annotators' answers (``export``) ingested first when given (counts in ``result``)."""
    from autorater.serving.labelling.ingest import append_annotations, read_labels

    pool = Suite.load(pool_dir)
    if export is not None:
        labels, problems, _ = read_labels(export, pool, tasks_file)
        result["new_labels"] = append_annotations(pool, labels)
        result["refused_labels"] = [str(p) for p in problems if p.level == "error"]
        pool = Suite.load(pool_dir)
    return pool


def _train_challenger(champion, pool: Suite, challenger_dir: Path, tracking_uri: str, finetune: bool, train_config,
                      epochs: int | None, cache_dir: str, seed: int, device: str, progress: bool):
    """The challenger trained on the pool's labels (fine-tuned from the champion's weights by the fine-tuning a version
    challenger gets, ``serving.labelling.adapt.fine_tune``; or from scratch), tracked and registered: (its
    ``TrainResult``, the run, the registered version)."""
    from autorater.serving.labelling.adapt import fine_tune, finetune_recipe
    from autorater.training.recipe import recipe_for
    from autorater.training.tracking import track_training
    from autorater.training.train import train

    if finetune and train_config is None:
        tc = finetune_recipe(champion.config, epochs=epochs, cache_dir=cache_dir, seed=seed, device=device)
        return fine_tune(champion, [pool], challenger_dir, tc, tracking_uri=tracking_uri, experiment="autorater-active",
                         run_name="challenger (fine-tuned)", progress=progress)
    if train_config is None:
        train_config = recipe_for(champion.config)
    tc = dataclasses.replace(train_config, cache_dir=cache_dir, seed=seed, epochs=epochs or train_config.epochs,
                             device=device)
    init = champion.model.trainable_state_dict() if finetune else None
    return track_training(
        tracking_uri, "autorater-active", f"challenger ({'fine-tuned' if finetune else 'retrained'})",
        champion.config, tc, [pool], out=challenger_dir, progress=progress,
        fn=lambda log: train([pool], champion.config, tc, out=challenger_dir, log=log, progress=progress,
                             init_state=init))


def _judge(champion, challenger, refs: Suite, judged: set, cache_dir: str, level: float, margin: float,
           seed: int) -> tuple[dict, dict, int]:
    """Both models on the judging references: the evaluation report, the paired comparison (challenger minus
    champion) and how many references it compared."""
    from autorater.calibration import paired_comparison
    from autorater.training.baselines import predict_cached
    from autorater.training.evaluate import evaluate, gold_table

    rows = {"champion": predict_cached(champion.model, refs, cache_dir, name="champion",
                                       calibration=champion.calibration),
            "challenger": predict_cached(challenger.model, refs, cache_dir, name="challenger",
                                         calibration=challenger.calibration)}
    rows = {k: [r for r in v if r["continuation_id"] in judged] for k, v in rows.items()}
    report = evaluate(refs, rows, gold="references")
    gold = gold_table(refs, "references")
    pred = {k: {r["continuation_id"]: r["outcome"] == "success" for r in v if "outcome" in r} for k, v in rows.items()}
    ids = [i for i in gold.index if i in judged and i in pred["champion"] and i in pred["challenger"]]
    comparison = paired_comparison([gold.at[i, "outcome"] == "success" for i in ids],
                                   [pred["champion"][i] for i in ids], [pred["challenger"][i] for i in ids],
                                   groups=[refs.get(i).scenario_id for i in ids], level=level, margin=margin, seed=seed)
    return report, comparison, len(ids)


def _log_round(tracking_uri: str, run_id: str, report: dict, comparison: dict, n: int, rule: str) -> None:
    """The round's evaluation and comparison on the challenger's MLflow run."""
    from autorater.training.tracking import log_evaluation

    log_evaluation(tracking_uri, run_id, report, prefix="round")
    numbers = {"ba_champion": comparison["ba_a"], "ba_challenger": comparison["ba_b"],
               "difference": comparison["difference"], "ci_low": comparison["ci"][0], "ci_high": comparison["ci"][1],
               "level": comparison["level"], "margin": comparison["margin"], "mcnemar_p": comparison["mcnemar_p"],
               "n_references": n, "promoted": float(comparison["better"])}
    log_evaluation(tracking_uri, run_id, numbers, prefix="round.comparison",
                   tags={"active.promoted": str(comparison["better"]).lower(),
                         "active.ba_champion": f"{comparison['ba_a']:.4f}", "active.rule": rule})


def judging_split(refs: Suite, champion_calibration: dict, calibration_share: float = 0.5,
                  seed: int = 0) -> tuple[list[str], list[str], dict]:
    """Which references calibrate the challenger and which judge both models: never the same ones.

    The references the champion's calibration used (its ``calibration.json`` records them) calibrate the
    challenger too and judge neither; when it records none of this suite's, whole scenarios are drawn at
    random (``calibration_share`` of the references) to calibrate the challenger, and the rest judge.

    Returns:
        ``(calibrate_on, judge_on, how)``: continuation ids, and a JSON-able note of the split.
    """
    from autorater.calibration.split import group_split

    ids = [r.continuation_id for r in refs.references]
    used = set(champion_calibration.get("scaling_ids", [])) | set(champion_calibration.get("threshold_ids", []))
    if used & set(ids):
        calibrate_on = [i for i in ids if i in used]
        how = {"method": "the champion's calibration references calibrate the challenger; the rest judge"}
    else:
        scenario = [refs.get(i).scenario_id for i in ids]
        if len(set(scenario)) < 2:
            raise ValueError(f"{refs.root}: the references span {len(set(scenario))} scenario(s); judging a challenger "
                             f"on references it was not calibrated on needs at least 2 (fix: add references or pass "
                             f"--references with a suite that has more)")
        part = group_split(scenario, calibration_share, np.random.default_rng(seed))
        calibrate_on = [i for i, m in zip(ids, part) if m]
        how = {"method": f"scenarios drawn at random: {calibration_share:.0%} of the references calibrate the "
                         f"challenger, the rest judge",
               "champion_calibration": "recorded on another suite" if used else
               "unrecorded (a calibration.json written before the split, or none): it may have seen these references"}
    judge_on = [i for i in ids if i not in set(calibrate_on)]
    if not judge_on:
        raise ValueError(f"{refs.root}: every reference was used to calibrate the champion, none is left to judge "
                         f"(fix: pass --references with a suite whose references it was not calibrated on)")
    return calibrate_on, judge_on, {**how, "n_calibrate": len(calibrate_on), "n_judge": len(judge_on),
                                    "judge_ids": judge_on}


__all__ = ["STRATEGIES", "acquisition_scores", "active_select", "class_balanced_top", "diverse_top", "judging_split",
           "select",
           "run_round", "unlabelled"]
