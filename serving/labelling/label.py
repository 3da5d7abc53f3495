"""``autorater label``: rate a new suite version in batches, resumably, and route the uncertain cases to humans.

The job writes one labels folder (``autorater.serving.labelling.folder``: ``job.json``, ``parts/``, ``labels.jsonl``,
``errors.jsonl``, ``summary.json``, ``labelstudio/``).

Exactly once, whatever happens: batch ``k`` always holds the same continuations (the suite's order cut
into ``batch_size`` slices) and is written with a temp file, fsync and rename, so after a crash,
even ``kill -9``, a batch file is either whole or absent. ``--resume`` rates the missing batches and
then assembles ``labels.jsonl`` from the batch files, so an interrupted-then-resumed job gives the same
bytes as an uninterrupted one, and re-running a finished job changes nothing.

Routing: the calibrated probability goes through the stored ``SelectivePolicy`` (auto-success,
auto-failure or a human); an undecodable video, an uncalibrated model and (with
``on_drift="route"``) a drifted suite send continuations to humans. A random audit slice of the
auto-labelled continuations also goes to humans, so success rates can be estimated without bias
(see serving.analysis.leaderboard). The audit draw hashes the continuation id with the seed: the same
continuations whatever the batch size, order or restarts.

Example:
    >>> summary = label_suite("model", Suite.load("suite-v3"), "labels-v3", progress=True)  # doctest: +SKIP
    >>> summary["auto"], summary["human"], summary["coverage"]                             # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as futures
import functools
import hashlib
import json
import os
import secrets
import time
import zlib
from pathlib import Path

import numpy as np

from autorater.calibration import CLAIMS
from autorater.data.files import jsonl_text
from autorater.data.suite import Suite
from autorater.device import DEFAULT_DEVICE, ray_gpus
from autorater.rater import Rater, folder_fingerprint, model_name, read_record
from autorater.serving.labelling.folder import JOB_FILE, LabelJobError, LabelsFileError, LabelsFolder
from autorater.serving.labelling.strata import STRATA, parse_strata, plan_audit, stratum_fields
from autorater.serving.labelling.version import counts

LEDGER_NOTE = "the suite's labelling_jobs.jsonl"
MAX_BATCH_SIZE = 1024  # continuations rated at once (each a clip of frames in memory)
ADAPTATIONS = 2  # version challengers that may follow each stratum's model, by default
ADAPT_AFTER = 10  # human labels per category of a stratum before a challenger learns from them, by default


def audit_draw(continuation_id: str, seed: int, method: str = "blake2b") -> float:
    """A uniform number in [0, 1) fixed by (seed, id): the audit slice is ``audit_draw < audit_share``.

    ``blake2b`` (the default) is uniform however alike the ids are. ``crc32``, the draw of label folders
    written before it, is not: it is linear in the bits of the id, and on the 400 sequential ids of a suite
    (``c000000``...) its histogram departed from uniform (chi-square p < 0.05) for 20 seeds of 20, with
    bins a third under- or over-filled. It is kept so that such a folder resumes with its own draw.
    """
    key = f"{seed}:{continuation_id}".encode()
    if method == "crc32":
        return zlib.crc32(key) / 2 ** 32
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2 ** 64


def job_spec(model_dir: Path, suite: Suite, batch_size: int, audit_share: float, seed: int, on_drift: str,
             certify: str = "audit", strata: tuple[str, ...] = STRATA, claim: str = "family",
             audit_budget: float | None = None, adapt: int = 0, adapt_after: int = 10,
             replay: list[str] | None = None, cache_dir: str | None = None, adapt_epochs: int | None = None,
             job_id: str | None = None) -> dict:
    """What identifies a labelling job: a folder is resumed only by the same spec (its ``job_id`` and drawn ``seed``
    are the folder's own)."""
    ids = suite.continuation_ids()
    return {"suite": str(suite.root.resolve()), "suite_name": suite.info.name, "suite_version": suite.info.version,
            "continuations": len(ids), "ids_sha1": hashlib.sha1("\n".join(ids).encode()).hexdigest(),
            "model": str(model_dir.resolve()), "model_name": model_name(model_dir),
            **folder_fingerprint(model_dir), "batch_size": int(batch_size),
            "audit_share": float(audit_share), "seed": int(seed), "on_drift": on_drift, "audit_hash": "blake2b",
            "certify": certify, "strata": list(strata), "claim": claim, "audit_budget": audit_budget,
            "adapt": int(adapt), "adapt_after": int(adapt_after),
            "replay": [str(Path(p).resolve()) for p in replay or []],
            "cache_dir": cache_dir, "adapt_epochs": adapt_epochs, "job_id": job_id or secrets.token_hex(8)}


def default_replay(model_dir: Path) -> list[str]:
    """The suites a model was trained on, where its ``metadata.json`` records them and they are still there."""
    from autorater.rater import read_metadata

    try:
        paths = read_metadata(model_dir).get("train_suite_paths") or []
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str) and (Path(p) / "suite.json").is_file()]


def _rate_batches(rater: Rater, suite: Suite, folder: LabelsFolder, batches: list[list[str]], todo: list[int],
                  workers: int, bar) -> None:
    """Decode (``workers`` threads, a few batches ahead) and rate the batches ``todo``; one file each."""
    with futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        ahead = max(2, workers + 1)
        pending = {k: pool.submit(rater.decode, suite, batches[k]) for k in todo[:ahead]}
        for i, k in enumerate(todo):
            if i + ahead < len(todo):
                nxt = todo[i + ahead]
                pending[nxt] = pool.submit(rater.decode, suite, batches[nxt])
            rows = rater.rows(pending.pop(k).result(), duration=True, signature=True)
            folder.write_part(k, rows)
            if bar is not None:
                bar.update(len(batches[k]))


class _RayRater:
    """A Ray Data actor: loads the rater once, on ``device``, then rates whole batches (``k``, ``ids``) into part-file
    text."""

    def __init__(self, model_dir: str, suite_root: str, threads: int, device: str = DEFAULT_DEVICE,
                 allow_unverified: bool = False):
        import torch

        torch.set_num_threads(threads)
        self.rater = Rater.load(model_dir, device, allow_unverified=allow_unverified)
        self.suite = Suite.load(suite_root)

    def __call__(self, batch: dict) -> dict:
        texts = [jsonl_text(self.rater.rows(self.rater.decode(self.suite, json.loads(ids_json)), duration=True,
                                            signature=True))
                 for ids_json in batch["ids"]]
        return {"k": np.asarray(batch["k"]), "text": np.asarray(texts, dtype=object)}


def _rate_batches_ray(model_dir: Path, suite: Suite, folder: LabelsFolder, batches: list[list[str]], todo: list[int],
                      workers: int, address: str | None, bar, device: str = DEFAULT_DEVICE,
                      allow_unverified: bool = False) -> None:
    """The same batches on Ray Data: ``map_batches`` over an actor pool (one model per actor); the driver writes
    each part file as it arrives, so resuming works exactly as with the local backend."""
    try:
        import ray
    except ImportError:
        raise ValueError("the Ray backend needs Ray: pip install \".[ray]\" (or pip install \"ray[data]\")") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 **({} if address else {"num_cpus": os.cpu_count()}))
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    items = [{"k": k, "ids": json.dumps(batches[k])} for k in todo]
    ds = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 4 * max(1, workers))))
    gpus = ray_gpus(device, ray.cluster_resources())  # what the cluster has; the actor resolves "auto" itself
    ds = ds.map_batches(_RayRater, batch_size=1, concurrency=max(1, workers), num_cpus=1, num_gpus=gpus,
                        fn_constructor_args=(str(model_dir.resolve()), str(suite.root.resolve()), 1, device,
                                             allow_unverified))
    for row in ds.iter_rows():
        k = int(row["k"])
        folder.write_part(k, row["text"])
        if bar is not None:
            bar.update(len(batches[k]))


def _policy(rows: list[dict], model_dir: Path, spec: dict) -> tuple[list[dict], dict[str, bool], dict | None,
                                                                    object, str | None]:
    """The stored calibration applied to the rated rows: (rated rows, continuation id -> the reference policy would
    auto-label it, the drift check, the calibration record, why everything goes to humans or None)."""
    from autorater.serving.labelling.model_calibration import check_drift

    scored = [r for r in rows if "error" not in r]
    drift = check_drift(model_dir, [r["logit"] for r in scored])
    record = read_record(model_dir)
    auto = np.zeros(len(scored), dtype=bool)
    routed_by = None
    if record is None:
        routed_by = "uncalibrated"
    elif not record.feasible:
        routed_by = "no_operating_point"
    elif drift is not None and drift["drifted"] and spec["on_drift"] == "route":
        routed_by = "drift"
    elif scored:
        p = np.array([r["p_success"] for r in scored])
        spread = np.array([r.get("marker_spread_s", np.nan) for r in scored], dtype=float)
        auto = record.policy().decide(p, marker_uncertainty=spread) == "auto"
    return scored, {r["continuation_id"]: bool(a) for r, a in zip(scored, auto)}, drift, record, routed_by


def excluded_ids(suite: Suite, ids: list[str], replay: list[str], bound: dict[str, str]) -> dict[str, str]:
    """The continuations no audit may draw, and why: ``human_labelled`` (the suite holds human labels of it),
    ``learned`` (its video is in a suite the model is replayed from: the model learned its label), ``bound`` (an
    earlier labelling job's evidence decided it: ``serving.labelling.ledger``)."""
    out = {cid: "bound" for cid in ids if cid in bound}
    labelled = {a.continuation_id for a in suite.annotations}
    out.update({cid: "human_labelled" for cid in ids if cid in labelled and cid not in out})
    if replay:
        from autorater.data.files import content_sha1

        seen = set()
        for path in replay:
            try:
                other = Suite.load(path)
            except (OSError, ValueError):
                continue
            seen |= {content_sha1(other.video_path(c)) for c in other.continuation_ids()
                     if other.video_path(c).is_file()}
        out.update({cid: "learned" for cid in ids if cid not in out and suite.video_path(cid).is_file()
                    and content_sha1(suite.video_path(cid)) in seen})
    return out


def build_plan(scored: list[dict], auto: dict[str, bool], excluded: dict[str, str], errors: list[str], record,
               spec: dict, suite: Suite) -> dict:
    """The version's audit plan (``plan.json`` less its seal): each stratum's design, budget, model shares, model 0's
    audit order and its state at label time; deterministic in its inputs, so ``certify`` can recompute it."""
    from autorater.serving.labelling.rounds import open_strata
    from autorater.serving.labelling.version import rules_of

    draw = functools.partial(audit_draw, seed=spec["seed"], method=spec["audit_hash"])
    fields = {r["continuation_id"]: stratum_fields(suite, r["continuation_id"]) for r in scored}
    mine = [{"continuation_id": cid, "provisional": auto[cid] and cid not in excluded, "excluded": cid in excluded,
             "inputs": r.get("inputs"), "confidence": max(r["p_success"], 1 - r["p_success"]),
             "scenario": fields[cid]["scenario"]} for r in scored for cid in [r["continuation_id"]]]
    planned, strata = plan_audit(mine, fields, record, strata=spec["strata"], draw=draw, on_drift=spec["on_drift"],
                                 claim=spec["claim"], seed=spec["seed"], adaptations=spec.get("adapt", 0))
    outcome = {r["continuation_id"]: r["outcome"] for r in scored}
    doc = {"target": record.target_agreement, "confidence": record.confidence, "claim": spec["claim"],
           "audit_budget": spec["audit_budget"], "strata_by": list(spec["strata"]), "seed": spec["seed"],
           "adapt": {"max": spec.get("adapt", 0), "after": spec.get("adapt_after", 10),
                     "replay": list(spec.get("replay") or []), "cache_dir": spec.get("cache_dir"),
                     "epochs": spec.get("adapt_epochs")},
           "excluded": dict(sorted(excluded.items())), "errors": list(errors),
           "stratum_of": {cid: planned[cid]["stratum"] for cid in outcome},
           "reasons": {cid: "uncertain" if not auto[cid] else "below_stratum_level" for cid in outcome
                       if cid not in excluded and planned[cid]["audit_rank"] is None},
           "strata": strata}
    category = {c.continuation_id: suite.scenario_by_id[c.scenario_id].category for c in suite.continuations}
    prior = {cid: "labelled" for cid, why in excluded.items() if why == "human_labelled"}
    open_strata(strata, planned, outcome, doc["stratum_of"], excluded, spec["model_name"], rules_of(doc), category,
                prior)
    return doc


def verify_plan(folder: LabelsFolder, job: dict, plan: dict, base: list[dict], suite: Suite) -> None:
    """Recompute the sealed plan from the part files, the model's ``calibration.json`` and the job; a plan that differs
    (edited and sealed again) is refused naming the field. Skipped when the model folder is gone (the seal stands)."""
    from autorater.rater import CALIBRATION_FILE, folder_fingerprint

    model_dir = Path(job["model"])
    if not (model_dir / CALIBRATION_FILE).is_file():
        return
    if folder_fingerprint(model_dir).get("calibration_sha1") != job.get("calibration_sha1"):
        raise LabelJobError(f"{model_dir}: its calibration.json changed after {folder.root} was labelled, so the "
                            f"label-time plan cannot be checked (fix: restore it, or label the version again)")
    spec = {**job, "model_name": job.get("model_name")}
    scored, auto, _, record, _ = _policy(base, model_dir, spec)
    again = build_plan(scored, auto, plan.get("excluded") or {}, plan.get("errors") or [], record, spec, suite)
    for field in sorted(set(again) | set(plan)):
        if field == "strata":
            continue
        if again.get(field) != plan.get(field):
            raise LabelsFileError(folder.plan, None, f"field '{field}' is not what `autorater label` planned "
                                                     f"({_shown(plan.get(field))} against {_shown(again.get(field))})")
    for key in sorted(set(again["strata"]) | set(plan["strata"])):
        mine, theirs = plan["strata"].get(key) or {}, again["strata"].get(key) or {}
        for field in sorted(set(mine) | set(theirs)):
            if json.dumps(mine.get(field), sort_keys=True) != json.dumps(theirs.get(field), sort_keys=True):
                raise LabelsFileError(folder.plan, None, f"stratum {key!r}: field '{field}' is not what `autorater "
                                                         f"label` planned")


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _decide(rows: list[dict], model_dir: Path, spec: dict, suite: Suite) -> tuple[list[dict], list[dict], dict,
                                                                                  dict | None]:
    """The labels, the human queue, the summary's information and the sealed plan (None without an audit): the stored
    calibration routes each row; with ``certify="audit"`` the version's audit is planned (:func:`build_plan`) and the
    rows are derived from it as ``certify`` derives them (``serving.labelling.version``)."""
    scored, by_id, drift, record, routed_by = _policy(rows, model_dir, spec)
    on_audit = spec["certify"] == "audit"
    plan = None
    if on_audit and routed_by is None and scored:
        from autorater.serving.labelling.ledger import bound_ids
        from autorater.serving.labelling.version import VersionState, derive_rows, human_majority

        excluded = excluded_ids(suite, [r["continuation_id"] for r in scored], list(spec.get("replay") or []),
                                bound_ids(suite.root, except_job=spec.get("job_id")))
        errors = [r["continuation_id"] for r in rows if "error" in r]
        plan = build_plan(scored, by_id, excluded, errors, record, spec, suite)
        prior = [a for a in suite.annotations if excluded.get(a.continuation_id) == "human_labelled"]
        labels, queue = derive_rows(rows, VersionState.fold(plan, []), {}, human_majority(prior))
    else:
        labels = [_simple_row(r, by_id, routed_by, spec) for r in rows]
        queue = [r for r in labels if r["decision"] == "human" or r["audit"]]
    operating_point = None if record is None else {
        "t_success": record.t_success, "t_fail": record.t_fail, "target_agreement": record.target_agreement,
        "confidence": record.confidence, "bound": record.bound, "expected_coverage": record.expected_coverage,
        "feasible": record.feasible, "reference_evidence": record.reference_evidence(),
        "calibration_suite": f"{record.reference_suite}@{record.reference_suite_version}"}
    info = {"calibrated": record is not None, "drift": drift, "routed_by": routed_by,
            "operating_point": operating_point,
            "certification": _plan_summary(spec, plan, operating_point, routed_by)}
    return labels, queue, info, plan


def _simple_row(r: dict, by_id: dict[str, bool], routed_by: str | None, spec: dict) -> dict:
    """A row without a version audit: the references' promise carried over (``certify="references"``), or every row
    to humans (uncalibrated, no operating point, drifted scores)."""
    cid = r["continuation_id"]
    row = {"continuation_id": cid}
    if "error" in r:
        row.update(p_success=None, outcome=None, marker_s=None, failure_mode=None, model=r["model"],
                   decision="human", audit=False, reason="video_error", error=r["error"])
        return row
    is_auto = by_id[cid]
    audit = bool(is_auto and audit_draw(cid, spec["seed"], spec["audit_hash"]) < spec["audit_share"])
    row.update(p_success=r["p_success"], outcome=r["outcome"] if is_auto else None,
               marker_s=r["marker_s"] if is_auto else None, failure_mode=r["failure_mode"] if is_auto else None,
               model=r["model"], decision="auto" if is_auto else "human", audit=audit)
    if not is_auto:
        row["reason"] = routed_by or "uncertain"
    row.update(model_outcome=r["outcome"], model_marker_s=r["marker_s"], model_failure_mode=r["failure_mode"],
               logit=r["logit"], marker_spread_s=r["marker_spread_s"], duration_s=r["duration_s"])
    return row


def _plan_summary(spec: dict, plan: dict | None, operating_point: dict | None, routed_by: str | None) -> dict:
    """The summary's ``certification`` before ``autorater certify``: what is provisional, the claim, each stratum's
    audit plan."""
    if routed_by is not None or (spec["certify"] == "audit" and plan is None):
        return {"evidence": "audit" if spec["certify"] == "audit" else "references", "state": "none",
                "operating_point": operating_point, "strata": {}, "round": 1,
                "promise": f"none: nothing is auto-labelled ({routed_by or 'nothing rated'}); every continuation goes "
                           f"to humans"}
    if spec["certify"] != "audit":
        return {"evidence": "references", "state": "carried",
                "promise": "carried from the calibration references (--certify references): NOT checked on this "
                           "version; it holds only if the version is drawn like those references"}
    n_audit = sum(p["design"]["first_batch"] for p in plan["strata"].values() if p["design"])
    strata = {key: {**{k: v for k, v in p.items() if k not in ("model", "state")},
                    "state": {"audit": "waiting"}.get(p["state"]["state"], p["state"]["state"]),
                    "reason": p["routed"]} for key, p in plan["strata"].items()}
    learning = sum(len(p["state"]["learning"]) for p in plan["strata"].values())
    return {"evidence": "audit", "state": "provisional", "claim": spec["claim"], "audit_budget": spec["audit_budget"],
            "strata_by": list(spec["strata"]), "operating_point": operating_point, "strata": strata,
            "adapt": plan["adapt"], "round": 1, "revoked": [],
            "promise": (f"provisional: the auto-labels are certified by nothing yet; answer the {n_audit} audit tasks "
                        + (f"and {learning} learning tasks " if learning else "")
                        + f"in labelstudio/tasks.json, `autorater ingest` them, then `autorater certify` (claim: "
                        f"{spec['claim']})")}


def label_suite(model_dir: str | os.PathLike, suite: Suite, out: str | os.PathLike, *, resume: bool = False,
                workers: int = 1, batch_size: int = 16, audit_share: float = 0.1, seed: int | None = None,
                on_drift: str = "warn", video_url_prefix: str | None = None, backend: str = "local",
                ray_address: str | None = None, progress: bool = False, device: str = DEFAULT_DEVICE,
                allow_unverified: bool = False, certify: str = "audit", strata: str | tuple[str, ...] = STRATA,
                claim: str = "family", audit_budget: float | None = None, adapt: int = ADAPTATIONS,
                adapt_after: int = ADAPT_AFTER, replay: list[str] | None = None, cache_dir: str | None = None,
                adapt_epochs: int | None = None) -> dict:
    """Label every continuation of ``suite`` with the model folder ``model_dir``; returns the summary.

    Args:
        model_dir: a model folder (``calibration.json`` inside decides the routing; without it, all go to humans).
        suite: the new suite version.
        out: the labels folder (created; see the module docstring for its files).
        resume: finish an interrupted job in ``out``.
        workers: decoding threads.
        batch_size: continuations per batch (and per part file).
        audit_share: with ``certify="references"``: the share of the auto-labels audited by humans, at random (for
            unbiased rates); with ``"audit"`` each stratum's audit is planned sequentially
            (serving.labelling.strata) and this is not used.
        seed: the audit order's seed (None: drawn afresh for a new job and kept in ``job.json``, so that no two jobs
            share an audit order; give one only to reproduce a job).
        on_drift: ``"warn"`` (say so in the summary; a drifted stratum gets a larger audit) or ``"route"`` (send a
            drifted or new stratum, or everything when the scores drifted, to humans).
        video_url_prefix: how Label Studio reaches the videos (see serving.labelstudio.formats.build_tasks).
        backend: ``"local"`` (this process, ``workers`` decoding threads) or ``"ray"`` (Ray Data, an actor pool
            of ``workers`` actors, each loading the model once; same batches, same part files, same result).
        ray_address: the Ray cluster to join (None: start a local Ray on this machine).
        progress: show a progress bar.
        device: where the model rates ("auto": a GPU when present, else the CPU), on the local backend and in
            every Ray actor.
        allow_unverified: load weights without a checksum (``Autorater.from_pretrained``).
        certify: ``"audit"`` (auto-labels stay ``provisional`` until the version's own audit certifies them:
            ``autorater certify``) or ``"references"`` (the calibration references' promise is carried over
            unchecked, as before certification existed; the summary says so).
        strata: the fields that cut the version into strata for the audit (serving.labelling.strata.parse_strata).
        claim: the promise across strata, ``"family"`` (every certified stratum at once) or ``"fcr"`` (the expected
            share of certified strata below target): calibration.audit.
        audit_budget: the largest share of a stratum's provisional labels its audit may take before the stratum is
            routed (None: as many as the test can still use).
        adapt: how many version challengers may follow each stratum's model (0: none; ``serving.labelling.adapt``):
            each stratum's error budget is split across them in advance.
        adapt_after: human labels per category of a stratum before a challenger learns from them.
        replay: the training suites a challenger replays beside the version's labels (default: the ones the model's
            ``metadata.json`` records, where they still exist); their videos are also kept out of the audit.
        cache_dir: the feature cache a challenger trains and rates from (default ``runs/cache``).
        adapt_epochs: a challenger's epochs (default: the fine-tuning recipe's).
    """
    if certify not in ("audit", "references"):
        raise ValueError(f"certify must be 'audit' or 'references', got {certify!r}")
    strata = parse_strata(strata)
    if not 0.0 <= audit_share <= 1.0:
        raise ValueError(f"audit_share must be in [0, 1], got {audit_share}")
    if on_drift not in ("warn", "route"):
        raise ValueError(f"on_drift must be 'warn' or 'route', got {on_drift!r}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be from 1 to {MAX_BATCH_SIZE}, got {batch_size}")
    if seed is not None and not 0 <= seed < 2 ** 63:
        raise ValueError(f"seed must be from 0 to 2**63 - 1, got {seed}")
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    model_dir, out = Path(model_dir), Path(out)
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    if audit_budget is not None and not 0.0 < audit_budget <= 1.0:
        raise ValueError(f"audit_budget must be in (0, 1], got {audit_budget}")
    if adapt < 0 or adapt_after < 1:
        raise ValueError(f"adapt must be >= 0 and adapt_after >= 1, got {adapt}, {adapt_after}")
    folder = LabelsFolder(out)
    old = folder.read_job() if folder.job.is_file() else {}
    seed = old.get("seed", secrets.randbits(32)) if seed is None else seed  # 32 bits: what --seed takes back
    replay = default_replay(model_dir) if replay is None else replay
    spec = job_spec(model_dir, suite, batch_size, audit_share, seed, on_drift, certify, strata, claim, audit_budget,
                    adapt, adapt_after, replay, cache_dir, adapt_epochs, old.get("job_id"))
    if out.exists() and not folder.job.is_file() and any(p.name != ".lock" for p in out.iterdir()):
        raise LabelJobError(f"{out} exists and is not a labels folder (no {JOB_FILE}); choose an empty or new --out")
    with folder.lock("labelling or ingest job"):
        return _label_locked(model_dir, suite, folder, spec, resume, workers, batch_size, video_url_prefix, backend,
                             ray_address, progress, device, allow_unverified)


def _label_locked(model_dir: Path, suite: Suite, folder: LabelsFolder, spec: dict, resume: bool, workers: int,
                  batch_size: int, video_url_prefix: str | None, backend: str, ray_address: str | None,
                  progress: bool, device: str, allow_unverified: bool = False) -> dict:
    if folder.open_job(spec, resume):
        return folder.read_summary()
    started = time.time()
    ids = suite.continuation_ids()
    if spec["certify"] == "audit":  # before any rating: a version whose verdicts bind is refused at once
        from autorater.serving.labelling.ledger import plan_job

        plan_job(suite.root, spec["job_id"], folder.root, ids)
    batches = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]
    done = folder.done_parts(len(batches))
    todo = [k for k in range(len(batches)) if k not in done]
    if todo:
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(ids), desc="labelling", unit="video", initial=len(ids) - sum(len(batches[k])
                                                                                            for k in todo))
        try:
            if backend == "ray":
                _rate_batches_ray(model_dir, suite, folder, batches, todo, workers, ray_address, bar, device,
                                  allow_unverified)
            else:
                rater = Rater.load(model_dir, device, allow_unverified=allow_unverified)
                _rate_batches(rater, suite, folder, batches, todo, workers, bar)
        finally:
            if bar is not None:
                bar.close()

    rows = [r for k in range(len(batches)) for r in folder.read_part(k)]
    if [r["continuation_id"] for r in rows] != ids:  # cannot happen with whole part files; say so if it does
        raise LabelJobError(f"the part files in {folder.parts} do not cover the suite exactly once; "
                            f"delete {folder.root} and label again")
    labels, queue, info, plan = _decide(rows, model_dir, spec, suite)
    errors = [{"continuation_id": r["continuation_id"], "video": suite.get(r["continuation_id"]).video,
               "error": r["error"], "fix": "re-encode the video (H.264 mp4) or re-record it; it was sent to humans"}
              for r in labels if "error" in r]
    folder.write_errors(errors)
    if plan is not None:
        folder.write_plan(plan, folder.read_job())
    tasks = folder.write_labelstudio(suite, queue, video_url_prefix)
    summary = {"suite": f"{suite.info.name}@{suite.info.version}", "model": spec["model_name"],
               "continuations": len(labels), **counts(labels), "errors": len(errors), "human_tasks": tasks,
               **info, "rated_this_run": sum(len(batches[k]) for k in todo),
               "wall_s_this_run": round(time.time() - started, 2)}
    folder.write_summary(summary, default=_json_default)
    folder.write_labels(labels)  # last: its presence marks the job finished
    return summary


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.bool_):
        return bool(x)
    raise TypeError(f"not JSON serialisable: {type(x)}")


def format_summary(summary: dict) -> str:
    """A few lines for the terminal."""
    provisional = summary.get("provisional", 0)
    lines = [f"labelled {summary['continuations']} continuations of {summary['suite']} with {summary['model']}: "
             + (f"{provisional} provisional auto-labels, " if provisional else "")
             + f"{summary['auto']} auto ({summary['coverage']:.1%}), {summary['human']} to humans, plus an audit "
             f"slice of {summary['audit']} auto-labelled ones; {summary['errors']} undecodable videos"]
    op = summary.get("operating_point")
    if op and op["feasible"]:
        lines.append(f"operating point (from {op['calibration_suite']}): auto-success p >= {op['t_success']:.3f}, "
                     f"auto-failure p <= {op['t_fail']:.3f}; agreement >= {op['bound']:.3f} with "
                     f"{op['confidence']:.0%} confidence (target {op['target_agreement']})")
    if summary.get("routed_by"):
        why = {"uncalibrated": "the model has no calibration.json (run `autorater calibrate`)",
               "no_operating_point": "its calibration found no operating point that meets the target",
               "drift": "the suite drifted from the calibration suite (--on-drift route)"}[summary["routed_by"]]
        lines.append(f"every rated continuation went to humans: {why}")
    drift = summary.get("drift")
    if drift is not None:
        lines.append(("WARNING: " if drift["drifted"] else "") +
                     f"drift against calibration suite {drift['calibration_suite']}: {drift['message']}")
    if summary["reasons"]:
        lines.append("sent to humans because: " + ", ".join(f"{k} {v}" for k, v in summary["reasons"].items()))
    reasons = summary["reasons"]
    if reasons.get("learned"):
        lines.append(f"WARNING: the model was trained on the videos of {reasons['learned']} continuations of this "
                     f"version (its training suites hold them): their labels were learned, so no audit draws them")
    if reasons.get("bound"):
        lines.append(f"note: {reasons['bound']} continuations were decided by an earlier labelling job of this "
                     f"version (its verdicts bind: {LEDGER_NOTE})")
    cert = summary.get("certification")
    if cert:
        lines.append(f"promise: {cert['promise']}")
        for key, plan in sorted((cert.get("strata") or {}).items()):
            drift = plan.get("drift") or {}
            why = f" ({', '.join(drift['changed'])} moved)" if drift.get("changed") else ""
            design = plan.get("design")
            what = (f"routed to humans ({plan['routed']})" if plan["routed"] else "nothing provisional"
                    if design is None else f"audited at confidence >= {design['level']:.3f} ({design['size']} labels; "
                    f"first batch {design['first_batch']}, error budget {design['alpha']:.3g})")
            if plan.get("state") == "learning":
                what += "; a version challenger will learn from its first labels"
            lines.append(f"  {plan['status']} stratum {key}{why}: {plan['provisional']} provisional, {what}")
    return "\n".join(lines)


__all__ = ["audit_draw", "format_summary", "job_spec", "label_suite"]
