"""Version challengers: the labelling job's model fine-tuned on a version's own human labels, for the strata it failed.

Where a version is new (new tasks, a new camera, new agents) the labelling job's model is routed, and the labels the
annotators give teach it nothing. Here they do. When a stratum has its learning labels (``serving.labelling.rounds``),
``autorater certify`` trains one *version challenger* on every human label of the version so far (audit answers,
learning batches, routed continuations, the suite's own labels), with the training suites replayed beside them
(:data:`REPLAY_PER_LABEL` replayed continuations per version label, whole scenarios, so that the model does not forget
what it knew), starting from the job's model weights (:func:`fine_tune`: the architecture's recipe at a small rate; on
the CPU the heads and trainable top blocks learn on cached features, ``--device cuda`` trains what the architecture
lets train). The share :data:`rounds.DESIGN_SHARE` of each stratum's labels (whole scenarios) is held out of training:
on them the challenger's scores get a per-stratum temperature and shift (its threshold) and the level of its audit is
designed. It then rates the stratum's continuations that no human labelled, and its audit is committed.

The challenger is a model folder in the labels folder (``models/challenger-K``: config + safetensors +
``metadata.json``; ``ratings.jsonl``; ``lineage.json``: its parent, the labels it learned from and the strata it was
handed), registered in MLflow as a version challenger with that lineage when a tracking store is given. The general
champion is never replaced by it: ``autorater active round`` and promotion judge a challenger on references, apart.

Example:
    >>> result = train_challenger(folder, job, state, human, suite, strata=["category=reach|camera=corner"], k=1)
    ...                                                                                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autorater.data.files import write_text_atomic
from autorater.data.suite import Annotation, Suite
from autorater.device import DEFAULT_DEVICE
from autorater.serving.labelling.rounds import Rules, commit_challenger, design_split, uniform

REPLAY_PER_LABEL = 4  # replayed training continuations per version label (whole scenarios)
FINETUNE = {"lr": 3e-4, "warmup_steps": 10, "epochs": 10}  # the fine-tuning schedule (the recipe's other settings)


def finetune_recipe(config, *, epochs: int | None = None, cache_dir: str = "runs/cache", seed: int = 0,
                    device: str = DEFAULT_DEVICE, **changes):
    """The recipe that fine-tunes a model of ``config`` from its weights: its architecture's recipe at
    :data:`FINETUNE`'s rate, warm-up and epochs, the parts trained together (a start's weights are trained jointly)."""
    from autorater.training.recipe import recipe_for

    tc = recipe_for(config, **{**FINETUNE, **changes})
    return dataclasses.replace(tc, epochs=epochs or tc.epochs, patience=max(tc.patience, epochs or tc.epochs),
                               parts_apart=False, min_steps=0, cache_dir=cache_dir, seed=seed, device=device)


def fine_tune(parent, suites: Sequence[Suite], out: Path, tc, *, tracking_uri: str | None = None,
              experiment: str = "autorater-version", run_name: str = "version challenger", tags: Mapping | None = None,
              progress: bool = False):
    """``parent`` (a ``Rater``) fine-tuned on ``suites`` into ``out``; tracked and registered when ``tracking_uri``
    is given (the run tagged with ``tags``). Returns ``(TrainResult, run_id, registered version)``."""
    from autorater.training.train import train

    init = parent.model.trainable_state_dict()
    if tracking_uri is None:
        return train(list(suites), parent.config, tc, out=out, progress=progress, init_state=init), None, None
    from autorater.training.tracking import track_training

    if tracking_uri.startswith("sqlite:///"):  # the store's folder, made when a challenger is first registered
        Path(tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    result, run_id, version = track_training(
        tracking_uri, experiment, run_name, parent.config, tc, list(suites), out=out, progress=progress,
        fn=lambda log: train(list(suites), parent.config, tc, out=out, log=log, progress=progress, init_state=init))
    if run_id is not None and tags:
        import mlflow

        client = mlflow.tracking.MlflowClient(tracking_uri)
        for k, v in tags.items():
            client.set_tag(run_id, k, str(v)[:5000])
    return result, run_id, version


def version_suite(suite: Suite, labels: Mapping[str, Sequence[dict]], ids: Sequence[str]) -> Suite:
    """The version as training data: its continuations ``ids`` with their human labels only (in memory: same videos,
    same folder, so the feature cache is shared)."""
    keep = set(ids)
    annotations = [Annotation(**{k: v for k, v in row.items() if k in Annotation.__dataclass_fields__})
                   for cid in ids for row in labels.get(cid, ())]
    continuations = [c for c in suite.continuations if c.continuation_id in keep]
    scenarios = {c.scenario_id for c in continuations}
    return Suite(suite.root, suite.info, [s for s in suite.scenarios if s.scenario_id in scenarios], continuations,
                 annotations, [])


def replay_suites(paths: Sequence[str], n: int, seed: int) -> list[Suite]:
    """About ``n`` labelled continuations of the training suites at ``paths``, whole scenarios drawn uniformly (the
    same for a seed), with their labels; their references are left out as training leaves them out."""
    suites = [Suite.load(p) for p in paths]
    total = sum(len(s.continuations) for s in suites)
    share = min(1.0, n / max(1, total))
    out = []
    for s in suites:
        keep = {sc.scenario_id for sc in s.scenarios if uniform(seed, "replay", s.info.name, sc.scenario_id) < share}
        ids = [c.continuation_id for c in s.continuations if c.scenario_id in keep]
        labelled = {a.continuation_id for a in s.annotations}
        ids = [c for c in ids if c in labelled]
        mine = set(ids)
        out.append(Suite(s.root, s.info, [sc for sc in s.scenarios if sc.scenario_id in keep],
                         [c for c in s.continuations if c.continuation_id in mine],
                         [a for a in s.annotations if a.continuation_id in mine], []))
    return [s for s in out if s.continuations]


def platt(logits: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """A per-stratum temperature and shift on held-out labels (``calibration.TemperatureScaler``), or the identity
    when they hold one class only."""
    from autorater.calibration import TemperatureScaler

    if len(set(y.tolist())) < 2:
        return 1.0, 0.0
    s = TemperatureScaler().fit(logits, y.astype(int))
    return float(s.temperature_), float(s.bias_)


@dataclasses.dataclass
class Challenger:
    """A trained version challenger: its folder, name, the strata's committed plans and what it cost."""

    k: int
    folder: Path
    name: str
    plans: list
    learned: list[str]
    train_s: float
    rate_s: float
    run_id: str | None = None
    registered_version: str | None = None


def train_challenger(root: Path, k: int, state, rules: Rules, human_rows: Mapping[str, Sequence[dict]],
                     human: Mapping[str, dict], suite: Suite, strata: Sequence[str], *, job: dict,
                     parent_logits: Mapping[str, float], device: str = DEFAULT_DEVICE,
                     tracking_uri: str | None = None, progress: bool = False) -> Challenger:
    """Train the K-th challenger of a labels folder and commit its plans for ``strata`` (the module docstring).

    Args:
        root: where its folder goes (``models/challenger-K``; a leftover of a crashed run is replaced).
        state: the version's state (``version.VersionState``): strata, their models and continuations.
        rules: the plan's rules (budget shares, seed, learning settings).
        human_rows: continuation id -> its human label rows (training data).
        human: continuation id -> the humans' majority (the labelled set; the design set's truth).
        suite: the version.
        strata: the strata handed to it (their learning labels are in).
        job: the labelling job (its model is the parent).
        parent_logits: the job's model's raw scores (its part files), for its re-thresholded candidate.
    """
    from autorater.rater import Rater, update_metadata

    plan = state.plan
    adapt = plan.get("adapt") or {}
    stratum_of, scenario = plan["stratum_of"], {c.continuation_id: c.scenario_id for c in suite.continuations}
    labelled = [c for c in suite.continuation_ids() if c in human]
    design = {key: set(design_split([c for c in labelled if stratum_of.get(c) == key], scenario, rules.seed)[1])
              for key in strata}
    held = set().union(*design.values()) if design else set()
    learned = [c for c in labelled if c not in held]
    folder = root / f"challenger-{k}"
    shutil.rmtree(folder, ignore_errors=True)
    parent = Rater.load(job["model"])
    tc = finetune_recipe(parent.config, epochs=adapt.get("epochs"), cache_dir=adapt.get("cache_dir") or "runs/cache",
                         seed=rules.seed + k, device=device)
    training = [version_suite(suite, human_rows, learned)] + replay_suites(
        adapt.get("replay") or [], REPLAY_PER_LABEL * len(learned), rules.seed + k)
    started = time.time()
    lineage = {"parent": job["model"], "parent_name": job.get("model_name"), "labels_folder": str(root.parent),
               "strata": list(strata), "learned": learned, "design_sets": {k_: sorted(v) for k_, v in design.items()},
               "replay": list(adapt.get("replay") or []), "k": k}
    tags = {"autorater.version_challenger": "true", "autorater.parent": job.get("model_name"),
            "autorater.labels_folder": str(root.parent), "autorater.learned_labels": len(learned),
            "autorater.learned_sha256": hashlib.sha256("\n".join(learned).encode()).hexdigest(),
            "autorater.strata": ";".join(strata)}
    _, run_id, version = fine_tune(parent, training, folder, tc, tracking_uri=tracking_uri,
                                   run_name=f"version challenger {k} of {Path(job['suite']).name}", tags=tags,
                                   progress=progress)
    train_s = time.time() - started
    name = f"challenger-{k}"
    update_metadata(folder, version_challenger=lineage)
    write_text_atomic(folder / "lineage.json", json.dumps(lineage, indent=1) + "\n")
    started = time.time()
    plans, ratings = _rate_and_plan(Rater.load(folder, device), suite, state, rules, strata, design, human, learned,
                                    name, tc.cache_dir, parent_logits)
    write_text_atomic(folder / "ratings.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in ratings))
    return Challenger(k, folder, name, plans, learned, train_s, time.time() - started, run_id,
                      None if version is None else str(version))


def candidate(key: str, index: int, name: str, logits: Mapping[str, float], held: Sequence[str],
              human: Mapping[str, dict], learned: Sequence[str], rules: Rules):
    """One candidate challenger of a stratum from its raw scores (``logits``: continuation id -> logit, for the
    stratum's unlabelled continuations and ``held``): a temperature and shift fitted on the labels ``held`` (its
    per-stratum threshold), its population and design set, its committed plan; (plan, calibrated p by id)."""
    t, b = platt(np.array([logits[c] for c in held]), np.array([human[c]["outcome"] == "success" for c in held]))
    scaled = {c: float(1 / (1 + np.exp(-(v / t + b)))) for c, v in logits.items()}
    population = {c: (max(p, 1 - p), "success" if p >= 0.5 else "failure") for c, p in scaled.items()
                  if c not in human}
    design_set = {c: (max(scaled[c], 1 - scaled[c]), (scaled[c] >= 0.5) == (human[c]["outcome"] == "success"))
                  for c in held}
    return commit_challenger(key, index, name, population, design_set, learned, rules), scaled, (t, b)


def expected_auto(plan) -> float:
    """The auto-labels a committed plan's design expects to leave after its audit (-inf: none expected)."""
    from autorater.calibration.audit import OVERSHOOT

    d = plan.design
    return -math.inf if d is None or math.isinf(d.expected_audit) else d.size - OVERSHOOT * d.expected_audit


def _rate_and_plan(rater, suite: Suite, state, rules: Rules, strata: Sequence[str], design: Mapping[str, set],
                   human: Mapping[str, dict], learned: Sequence[str], name: str, cache_dir: str,
                   parent_logits: Mapping[str, float]):
    """Each handed stratum's two candidates: the fine-tuned challenger (its threshold and level designed on the
    held-out design set) and the job's model re-thresholded on *every* human label of the stratum (it learned none
    of them: all design it). The one whose design expects more auto-labels is committed (a choice made on labels
    only, before any of its audit answers). The committed plans and the rating rows."""
    from autorater.training.baselines import predict_cached

    stratum_of = state.plan["stratum_of"]
    errors = set(state.plan.get("errors") or [])
    wanted = [c for c in suite.continuation_ids() if stratum_of.get(c) in set(strata) and c not in errors
              and (c not in human or any(c in d for d in design.values()))]
    sub = Suite(suite.root, suite.info, suite.scenarios, [suite.get(c) for c in wanted], [], [])
    rows = {r["continuation_id"]: r for r in predict_cached(rater.model, sub, cache_dir, name=name)
            if "error" not in r}
    plans, out = [], []
    for key in strata:
        index = state.states[key].model + 1
        mine = [c for c in wanted if stratum_of.get(c) == key and c in rows]
        tuned = candidate(key, index, name, {c: rows[c]["logit"] for c in mine}, [c for c in mine if c in design[key]],
                          human, learned, rules)
        every = [c for c in stratum_of if stratum_of[c] == key and c in human and c in parent_logits]
        own = [c for c in stratum_of if stratum_of[c] == key and c not in human and c in parent_logits]
        job = candidate(key, index, f"{state.models[key][0].name}+threshold-{index}",
                        {c: parent_logits[c] for c in (*own, *every)}, every, human, (), rules)
        plan, scaled, (t, b) = max((tuned, job), key=lambda cand: expected_auto(cand[0]))
        plans.append(plan)
        source = rows if plan is tuned[0] else {c: {"continuation_id": c, "logit": parent_logits[c]} for c in own}
        for c in (c for c in scaled if c not in human):
            r = source.get(c) or {"continuation_id": c}
            out.append({**{f: r[f] for f in ("continuation_id", "marker_s", "failure_mode", "logit",
                                             "marker_spread_s") if r.get(f) is not None},
                        "p_success": round(scaled[c], 6), "outcome": "success" if scaled[c] >= 0.5 else "failure",
                        "model": plan.name, "stratum": key, "temperature": t, "shift": b})
    return plans, out


__all__ = ["FINETUNE", "REPLAY_PER_LABEL", "Challenger", "candidate", "expected_auto", "fine_tune", "finetune_recipe",
           "platt", "replay_suites",
           "train_challenger", "version_suite"]
