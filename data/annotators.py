"""Simulated human annotators whose errors follow the STS paper's review of human labels.

Each annotator watches a continuation and places one marker: at the first moment of success, or at
the first moment of failure (a failure that is only a timeout at the end of the video). Their
errors, as the STS paper describes them:

- *plain mistakes*: a label flipped at random (``error_rate``);
- *rigidity*: a messy or late success (much dithering before it) marked as a failure
  (``rigidity`` x the item's ``messiness``);
- *ambiguity*: instructions several objects match ("go to a ball" with three balls), location words,
  near misses (the agent stood one action away from success) cause more flips
  (``ambiguity_sensitivity`` x the item's ``ambiguity``);
- *markers*: a positive reaction delay of a few hundred milliseconds, jitter, and sometimes no marker
  at all (null).

The default pool of 12 annotators (``h00``..``h11``) is tuned so an average annotator reaches about
0.90 balanced accuracy against the truth, each between about 0.86 and 0.94, on generated suites and
on ``synthetic_truths``.

Truth records are the lines of ``simulator_truth.jsonl`` (``autorater.data.generate``) or any mapping with
``continuation_id``, ``outcome``, ``marker_s``, ``failure_mode``, ``num_frames``, ``fps``, and
optionally ``category``, ``failure_modes`` (the modes an annotator may name on this item; else BabyAI's
for the category), ``takeover_s`` and ``traits`` (``messiness``, ``ambiguity``,
``near_miss_frame``, or the raw traits they are computed from).

Example:
    >>> truths = synthetic_truths(200, seed=0)
    >>> labels = simulate_annotations(truths, n_per_item=3, seed=0)
    >>> len(labels), labels[0].annotator_id[:1]
    (600, 'h')
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from autorater.data.suite import Annotation

_MODES_BY_CATEGORY = {
    "go_to": ("timeout",),
    "pick_up": ("wrong_object", "timeout"),
    "put_next": ("wrong_object", "wrong_placement", "timeout"),
    "open": ("wrong_door", "timeout"),
}


@dataclass(frozen=True)
class AnnotatorProfile:
    """One simulated annotator's habits."""

    annotator_id: str
    error_rate: float  # P(plain flip) on a clear item
    rigidity: float  # extra P(success marked failure) per unit of messiness
    ambiguity_sensitivity: float  # extra P(flip) per unit of ambiguity
    delay_s: float  # typical reaction delay of the marker (positive)
    jitter_s: float  # standard deviation of the marker's noise
    missing_marker: float  # P(no marker)


def default_pool(size: int = 12, seed: int = 1234) -> list[AnnotatorProfile]:
    """The annotator pool ``h00``..: skills spread evenly (a fixed seed), not drawn per suite."""
    rng = np.random.default_rng(seed)
    levels = (np.arange(size) + 0.5) / size  # even spread of skill, shuffled across ids
    skill, strictness = rng.permutation(levels), rng.permutation(levels)
    pool = []
    for i in range(size):
        s = skill[i]  # 0 = best, 1 = weakest
        pool.append(AnnotatorProfile(
            annotator_id=f"h{i:02d}",
            error_rate=round(0.035 + 0.035 * s, 4),
            rigidity=round(0.15 + 0.15 * strictness[i], 4),
            ambiguity_sensitivity=round(0.07 + 0.06 * s, 4),
            delay_s=round(float(rng.uniform(0.2, 0.5)), 3),
            jitter_s=round(float(rng.uniform(0.08, 0.25)), 3),
            missing_marker=round(float(rng.uniform(0.01, 0.05)), 3),
        ))
    return pool


def trait_scores(outcome: str, traits: Mapping, takeover_frame: int | None = None,
                 event_frame: int | None = None, num_frames: int | None = None) -> tuple[float, float]:
    """``(messiness, ambiguity)`` in [0, 1] from a truth record's raw traits.

    messiness (successes only): how far from expert play the run to success was: 0.7 x the share of
    steps that differ from the expert's, + 0.3 x how late in the continuation the success came.
    ambiguity: 0.35 if several objects match the instruction, + 0.2 for location words, + 0.45 for a
    near miss (failures only).
    """
    messiness = 0.0
    if outcome == "success":
        late = 0.0
        if takeover_frame is not None and event_frame is not None and num_frames:
            span = max(1, num_frames - 1 - takeover_frame)
            late = min(1.0, max(0.0, (event_frame - takeover_frame) / span))
        messiness = min(1.0, 0.7 * float(traits.get("off_expert_share", 0.0)) + 0.3 * late)
    multi = (traits.get("n_matching") or 1) > 1 or (traits.get("n_matching_fixed") or 1) > 1
    ambiguity = 0.35 * multi + 0.2 * bool(traits.get("has_location"))
    if outcome == "failure":
        ambiguity += 0.45 * bool(traits.get("near_miss"))
    return round(messiness, 4), round(min(1.0, ambiguity), 4)


def _item_rng(seed: int, continuation_id: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(continuation_id.encode())]))


def _get(truth, name, default=None):
    return truth.get(name, default) if isinstance(truth, Mapping) else getattr(truth, name, default)


def simulate_annotations(truths: Iterable[Mapping], n_per_item: int = 3, seed: int = 0,
                         pool: Sequence[AnnotatorProfile] | None = None) -> list[Annotation]:
    """Simulated human labels: ``n_per_item`` distinct annotators from ``pool`` per truth record.

    Deterministic for a seed, and per item: an item's labels do not depend on the other items, so a
    labelling queue answered in any order or batch gets the same answers.

    Args:
        truths: truth records (see the module docstring).
        n_per_item: annotators per item (all of the pool if larger than it).
        seed: the seed.
        pool: annotator profiles; ``default_pool()`` if None.
    """
    pool = list(pool) if pool is not None else default_pool()
    if n_per_item < 1:
        raise ValueError(f"n_per_item must be >= 1, got {n_per_item}")
    out: list[Annotation] = []
    for truth in truths:
        cid = _get(truth, "continuation_id")
        rng = _item_rng(seed, cid)
        k = min(n_per_item, len(pool))
        chosen = sorted(rng.choice(len(pool), size=k, replace=False))
        for i in chosen:
            out.append(_annotate(truth, pool[i], rng))
    return out


def _annotate(truth, who: AnnotatorProfile, rng: np.random.Generator) -> Annotation:
    outcome = _get(truth, "outcome")
    fps = float(_get(truth, "fps", 8.0))
    num_frames = int(_get(truth, "num_frames"))
    duration = num_frames / fps
    takeover_s = float(_get(truth, "takeover_s", 0.0) or 0.0)
    marker = _get(truth, "marker_s")
    mode = _get(truth, "failure_mode")
    category = _get(truth, "category", "go_to")
    traits = _get(truth, "traits", {}) or {}
    if "messiness" in traits and "ambiguity" in traits:
        messiness, ambiguity = float(traits["messiness"]), float(traits["ambiguity"])
    else:
        messiness, ambiguity = trait_scores(outcome, traits, _get(truth, "takeover_frame"),
                                            _get(truth, "event_frame"), num_frames)
    near_miss_frame = traits.get("near_miss_frame")

    # Which error, if any (drawn in a fixed order so the rng stream is stable).
    u_plain, u_amb, u_rigid = rng.random(3)
    plain = u_plain < who.error_rate
    amb = u_amb < who.ambiguity_sensitivity * ambiguity
    rigid = outcome == "success" and u_rigid < who.rigidity * messiness
    wrong = plain or amb or rigid

    delay = who.delay_s * float(rng.lognormal(0.0, 0.35))
    jitter = float(rng.normal(0.0, who.jitter_s))
    modes = tuple(_get(truth, "failure_modes") or _MODES_BY_CATEGORY.get(category, ("timeout",)))
    u_mode, u_other, u_time = rng.random(3)

    def react(t: float) -> float:
        return t + delay + jitter

    at_end = duration - abs(jitter) * 0.5  # a timeout is marked at the end of the video
    if not wrong:
        said = outcome
        if outcome == "success":
            m, said_mode = react(float(marker)), None
        elif mode == "timeout":
            m, said_mode = at_end, "timeout"
        else:  # an evident mistake, sometimes given another name
            m = react(float(marker))
            said_mode = mode if u_mode < 0.9 else modes[int(u_other * len(modes))]
    elif outcome == "success":  # a success judged a failure
        said = "failure"
        if rigid or modes == ("timeout",) or u_mode < 0.5:
            m, said_mode = at_end, "timeout"  # "it never really did it"
        else:
            m, said_mode = react(float(marker)), modes[0]  # "that was the wrong one"
    else:  # a failure judged a success
        said, said_mode = "success", None
        if near_miss_frame is not None:
            m = react(near_miss_frame / fps)
        elif mode != "timeout":
            m = react(float(marker))
        else:
            m = takeover_s + u_time * (duration - takeover_s)
    marker_out = None if rng.random() < who.missing_marker else round(min(max(m, 0.0), duration), 3)
    return Annotation(continuation_id=_get(truth, "continuation_id"), annotator_id=who.annotator_id,
                      outcome=said, marker_s=marker_out, failure_mode=said_mode)


def synthetic_truths(n: int, seed: int = 0, success_rate: float = 0.45, fps: float = 8.0) -> list[dict]:
    """Cheap truth records with realistic traits (no simulation, no videos), for tests and tuning."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        category = ("go_to", "pick_up", "put_next", "open")[int(rng.integers(4))]
        num_frames = int(rng.integers(28, 110))
        takeover = int(rng.uniform(0.05, 0.3) * num_frames)
        success = rng.random() < success_rate
        traits = {"n_matching": int(rng.choice([1, 1, 1, 2, 1, 1, 1, 3])), "has_location": bool(rng.random() < 0.15),
                  "near_miss": False, "near_miss_frame": None,
                  "off_expert_share": float(rng.beta(1.0, 3.5)) if success else float(rng.uniform(0.3, 1.0))}
        if success:
            event = takeover + 2 + int(rng.beta(1.2, 2.5) * (num_frames - takeover - 3))
            mode = None
        else:
            evident = category != "go_to" and rng.random() < 0.5
            event = int(rng.integers(takeover + 2, num_frames)) if evident else None
            mode = str(rng.choice(_MODES_BY_CATEGORY[category][:-1])) if evident else "timeout"
            if rng.random() < 0.4:
                traits["near_miss"] = True
                traits["near_miss_frame"] = int(rng.integers(takeover + 1, event or num_frames))
        messiness, ambiguity = trait_scores("success" if success else "failure", traits, takeover, event,
                                            num_frames)
        traits.update(messiness=messiness, ambiguity=ambiguity)
        out.append({"continuation_id": f"x{i:06d}", "category": category,
                    "outcome": "success" if success else "failure",
                    "marker_s": round((event if event is not None else num_frames) / fps, 6),
                    "failure_mode": mode, "event_frame": event, "num_frames": num_frames, "fps": fps,
                    "takeover_frame": takeover, "takeover_s": takeover / fps, "traits": traits})
    return out


def annotator_scores(annotations: Iterable, gold: Iterable) -> dict[str, dict]:
    """Per annotator: balanced accuracy, accuracy and count of their labels on the gold items.

    Args:
        annotations: Annotation records (or mappings).
        gold: records with ``continuation_id`` and ``outcome`` (references or truth).
    """
    truth = {_get(g, "continuation_id"): _get(g, "outcome") for g in gold}
    by: dict[str, list[tuple[str, str]]] = {}
    for a in annotations:
        cid = _get(a, "continuation_id")
        if cid in truth:
            by.setdefault(_get(a, "annotator_id"), []).append((truth[cid], _get(a, "outcome")))
    out = {}
    for who, pairs in sorted(by.items()):
        recalls = []
        for cls in ("success", "failure"):
            said = [p for t, p in pairs if t == cls]
            if said:
                recalls.append(sum(p == cls for p in said) / len(said))
        out[who] = {"balanced_accuracy": float(np.mean(recalls)) if recalls else float("nan"),
                    "accuracy": sum(t == p for t, p in pairs) / len(pairs), "n": len(pairs)}
    return out
