"""``autorater suite propose``: the next version's mix, chosen from a pool of candidate scenarios.

A suite that tells agents apart needs scenarios of middle difficulty *for today's agents*: ones every agent passes
or every agent fails say nothing. The candidates are scenarios of a pool (a generated batch, or newly mined ones)
with a few pilot continuations by today's agents and, per continuation, a predicted chance of success: the current
model's calibrated ``p_success`` (``autorater predict`` on the pool), or else the share of the pool's annotators who
said success. One item-response fit (``calibration.ItemResponseModel``) takes both the current versions' final labels
(who today's agents are and how able) and the pool's predictions (each continuation a success with weight ``p`` and
a failure with weight ``1 - p``), and gives every candidate a difficulty with its 95% interval. A candidate's value
is the Fisher information it carries about each of today's agents' abilities, ``p_a (1 - p_a)`` with ``p_a`` its
fitted chance for agent ``a``: highest where the scenario is of middle difficulty for that agent. The proposal is a
greedy A-optimal design (:func:`choose`): each pick lowers most the summed variance of the ability gaps between
agents adjacent in today's order, so the picks spread over the range of today's agents (harder ones for the best,
easier ones for the weakest) instead of piling up in the middle; balanced over categories (round robin: the counts
of two categories differ by at most one while both have candidates left).

The draft version is a suite folder: the chosen scenarios (tagged ``version:<draft>`` and ``proposed``, the
predicted difficulty and chances in their metadata), their pool continuations (videos hard-linked) and labels, and
``proposal.json`` with the table and the settings.

Example:
    >>> result = propose_version("pool", ["labels-v1", "labels-v2"], "draft-v3", n=24)   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import special

from autorater.data.files import FolderChange, json_text
from autorater.data.paths import open_regular, printable, resolve_under
from autorater.data.suite import TRUTH_FILE, Suite, jsonl_bytes
from autorater.data.versions import VERSION_PREFIX, next_version, scenario_version, version_tag

PROPOSAL_FILE = "proposal.json"
PROPOSED_TAG = "proposed"


@dataclass
class Candidate:
    """A pool scenario as the fit sees it: difficulty (log-odds, 95% interval), chance per today's agent, value."""

    scenario_id: str
    category: str
    difficulty: float
    difficulty_ci: list[float]
    chances: dict[str, float] = field(default_factory=dict)
    mean_chance: float = 0.0
    information: float = 0.0


def fit_candidates(current: list[dict], pool: list[dict]) -> tuple[list[Candidate], dict]:
    """Difficulties of the pool's scenarios for today's agents, from one item-response fit.

    Args:
        current: the current versions' labelled rows (``agent_id``, ``scenario_id``, ``outcome``); today's agents
            are theirs.
        pool: one row per pool continuation with a prediction: ``agent_id``, ``scenario_id``, ``category``,
            ``p_success`` (in [0, 1]).

    Returns:
        The candidates (pool scenarios with a prediction for at least one of today's agents) and the abilities
        (agent -> ability, interval).
    """
    from autorater.calibration.agents.irt import ItemResponseModel

    labelled = [r for r in current if r.get("outcome") is not None]
    today = sorted({r["agent_id"] for r in labelled})
    if not today:
        raise ValueError("the current labels hold no labelled continuation: nothing says who today's agents are "
                         "(fix: pass labels folders after ingest, or suites with annotations)")
    pool = [r for r in pool if r["agent_id"] in today]
    if not pool:
        raise ValueError(f"no pool continuation is by one of today's agents ({', '.join(today)}) with a prediction "
                         f"(fix: record them on the candidate scenarios, and rate them: autorater predict)")
    p = np.clip(np.array([float(r["p_success"]) for r in pool]), 0.0, 1.0)
    agents = [r["agent_id"] for r in labelled] + [r["agent_id"] for r in pool] * 2
    scenarios = [f"current/{r['scenario_id']}" for r in labelled] + [f"pool/{r['scenario_id']}" for r in pool] * 2
    y = [int(r["outcome"] == "success") for r in labelled] + [1] * len(pool) + [0] * len(pool)
    weights = np.concatenate([np.ones(len(labelled)), p, 1 - p])
    keep = weights > 0
    fitted = ItemResponseModel().fit(np.array(agents)[keep], np.array(scenarios)[keep], np.array(y)[keep],
                                     weights=weights[keep])
    theta = {str(a): float(v) for a, v in zip(fitted.agents_, fitted.ability_)}
    abilities = {a: {"ability": theta[a], "ability_ci": [float(v) for v in ci]}
                 for a, ci in zip(map(str, fitted.agents_), fitted.ability_interval())}
    today_theta = np.array([theta[a] for a in today])
    category = {r["scenario_id"]: r["category"] for r in pool}
    out = []
    for i, sid in enumerate(map(str, fitted.scenarios_)):
        if not sid.startswith("pool/"):
            continue
        b = float(fitted.difficulty_[i])
        chances = special.expit(today_theta - b)
        out.append(Candidate(sid[len("pool/"):], category[sid[len("pool/"):]], b,
                             [float(v) for v in fitted.difficulty_interval()[i]],
                             {a: float(c) for a, c in zip(today, chances)}, float(chances.mean()),
                             float(np.sum(chances * (1 - chances)))))
    return out, abilities


PRIOR_INFORMATION = 1 / 9  # an ability's prior precision (ItemResponseModel's prior sd of 3), before any scenario


def pair_weights(abilities: dict[str, dict]) -> dict[str, int]:
    """How many pairs of agents adjacent in the fitted order each agent is in (1 at the ends, 2 between)."""
    order = sorted(abilities, key=lambda a: -abilities[a]["ability"])
    return {a: (i > 0) + (i < len(order) - 1) for i, a in enumerate(order)} if len(order) > 1 else \
        dict.fromkeys(order, 1)


def choose(candidates: list[Candidate], n: int, balance: bool = True,
           weights: dict[str, float] | None = None) -> list[Candidate]:
    """``n`` candidates that together pin down the gaps between today's agents best, balanced over categories
    (round robin) unless ``balance`` is False.

    Greedy A-optimal design: the version's information about agent ``a`` is ``PRIOR_INFORMATION + sum p_a (1 - p_a)``
    over the chosen scenarios, the variance of its ability about one over that, and each pick is the candidate that
    lowers ``sum_a weights[a] / information_a`` most (``weights``: ``pair_weights``, so the variance of every gap
    between adjacent agents counts once; default 1 each). A scenario of middle difficulty for an agent whose ability is
    still loose is worth most: the picks spread over the range of today's agents instead of piling up in the middle.
    """
    if n < 1:
        raise ValueError(f"--n must be at least 1, got {n}")
    if n > len(candidates):
        raise ValueError(f"--n {n} but the pool holds only {len(candidates)} candidate scenario(s) with predictions "
                         f"(fix: a smaller --n, or a larger pool)")
    agents = sorted({a for c in candidates for a in c.chances})
    w = np.array([(weights or {}).get(a, 1.0) for a in agents])
    info = np.array([[c.chances.get(a, 0.5) * (1 - c.chances.get(a, 0.5)) if a in c.chances else 0.0
                      for a in agents] for c in candidates])  # (candidates, agents)
    have = np.full(len(agents), PRIOR_INFORMATION)
    left = np.ones(len(candidates), bool)
    categories = np.array([c.category if balance else "" for c in candidates])
    chosen: list[int] = []

    def gains() -> np.ndarray:  # (candidates,) how much each would lower the weighted variances
        # rounded, so that candidates the fit cannot tell apart tie exactly (argmax: the first) on any machine
        return np.where(left, np.round((w / have - w / (have + info)).sum(1), 6), -np.inf)

    while len(chosen) < n:
        g = gains()
        order = sorted((cat for cat in set(categories) if np.any(left & (categories == cat))),
                       key=lambda cat: (-np.max(np.where(categories == cat, g, -np.inf)), cat))
        for cat in order[:n - len(chosen)]:  # one per category per round, the most useful category first
            i = int(np.argmax(np.where(categories == cat, gains(), -np.inf)))
            chosen.append(i)
            left[i] = False
            have = have + info[i]
    return [candidates[i] for i in chosen]


def pool_predictions(pool: Suite, predictions: str | os.PathLike | None = None) -> tuple[list[dict], str]:
    """One row per pool continuation with a predicted chance of success, and what predicted it.

    From ``predictions`` (``autorater predict``'s JSON Lines: ``continuation_id``, ``p_success``), else from the
    pool's annotations (the share of annotators who said success)."""
    from autorater.data.labels import label_table, majority_vote

    if predictions is not None:
        p = read_predictions(predictions)
        how = f"the model's p_success ({Path(predictions).name})"
    elif pool.annotations:
        p = majority_vote(label_table(pool.annotations))["p_success"].to_dict()
        how = "the pool's annotations (share of annotators who said success)"
    else:
        raise ValueError(f"the pool {pool.root} has no annotations and no --predictions were given: nothing predicts "
                         f"its scenarios' difficulty (fix: autorater predict --model MODEL --suite {pool.root} --out "
                         f"pool.jsonl, then pass --predictions pool.jsonl)")
    rows = [{"agent_id": c.agent_id, "scenario_id": c.scenario_id, "continuation_id": c.continuation_id,
             "category": pool.scenario_by_id[c.scenario_id].category, "p_success": float(p[c.continuation_id])}
            for c in pool.continuations if c.continuation_id in p]
    return rows, how


MAX_PREDICTIONS_BYTES = 1 << 30


def read_predictions(path: str | os.PathLike) -> dict[str, float]:
    """continuation id -> ``p_success`` of ``autorater predict``'s JSON Lines.

    Raises:
        ValueError: naming the line, for a line that is not a JSON object, a ``continuation_id`` that is not a
            string, or a ``p_success`` that is not a number in [0, 1] (``1e400``, ``NaN``, ``-0.5``, ``"0.3"``);
            or a file that cannot be read (not a regular file, too large, not UTF-8).
    """
    path = Path(path)
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_PREDICTIONS_BYTES + 1)
    except OSError as err:
        raise ValueError(f"cannot read the predictions {path}: {err.strerror or err} (fix: pass the JSON Lines file "
                         f"autorater predict wrote)") from None
    if len(raw) > MAX_PREDICTIONS_BYTES:
        raise ValueError(f"the predictions {path} are larger than {MAX_PREDICTIONS_BYTES >> 30} GiB (fix: pass the "
                         f"JSON Lines file autorater predict wrote on the pool)")
    out: dict[str, float] = {}
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            row = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ValueError(f"{where}: not a JSON line (fix: one JSON object per line, as autorater predict "
                             f"writes)") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__} (fix: one JSON object per "
                             f"line, as autorater predict writes)")
        cid, value = row.get("continuation_id"), row.get("p_success")
        if not isinstance(cid, str):
            raise ValueError(f"{where}: no string 'continuation_id' (fix: one object per continuation, as autorater "
                             f"predict writes)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= 1:
            shown = printable(json.dumps(value)[:40]) if not isinstance(value, float) else repr(value)
            raise ValueError(f"{where}: p_success {shown} is not a probability (fix: a number from 0 to 1; rerun "
                             f"autorater predict)")
        out[cid] = float(value)
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _truth_lines(path: Path) -> list[dict]:
    """The objects of a pool's ``simulator_truth.jsonl``; a ValueError naming the line that is not one."""
    out = []
    with open_regular(path) as f:
        text = f.read().decode("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{number}: not a JSON object (fix: repair the pool's {TRUTH_FILE}, or remove it)")
        out.append(obj)
    return out


def propose_version(pool_dir: str | os.PathLike, labels: list[str | os.PathLike], out: str | os.PathLike, n: int, *,
                    predictions: str | os.PathLike | None = None, version: str | None = None,
                    balance: bool = True) -> dict:
    """Choose ``n`` scenarios of the pool for the next version and write them as a draft suite at ``out``.

    Args:
        pool_dir: the pool suite (candidate scenarios with pilot continuations by today's agents).
        labels: the current versions' labels folders or suites (``serving.analysis.versions.read_source``).
        out: a new (or empty) folder for the draft version.
        n: how many scenarios.
        predictions: ``autorater predict`` output on the pool (default: the pool's annotations).
        version: the draft's version (default: the one after the highest current version).
        balance: balance the choice over categories.

    Raises:
        ValueError: an empty pool, no predictions, ``n`` out of range, no current labels.
    """
    from autorater.serving.analysis.versions import merged_rows, read_source

    pool = Suite.load(pool_dir)
    if not pool.scenarios:
        raise ValueError(f"the pool {pool_dir} holds no scenario (fix: pass a suite of candidate scenarios, e.g. one "
                         f"`autorater suite generate` wrote)")
    current, _ = merged_rows([read_source(p) for p in labels])
    known = {r["scenario_id"] for r in current}  # VERSION/ID: a grown pool holds the current scenarios too
    old = {s.scenario_id for s in pool.scenarios
           if f"{scenario_version(s.tags, pool.info.version)}/{s.scenario_id}" in known}
    rows, how = pool_predictions(pool, predictions)
    rows = [r for r in rows if r["scenario_id"] not in old]
    candidates, abilities = fit_candidates(current, rows)
    chosen = choose(candidates, n, balance, pair_weights(abilities))
    version = version or next_version({r["version"] for r in current})
    result = {"pool": str(pool_dir), "labels": [str(p) for p in labels], "version": version, "n": n,
              "predicted_by": how, "balanced": balance, "candidates": len(candidates), "abilities": abilities,
              "chosen": [dataclasses.asdict(c) for c in chosen],
              "pool_mean_information": float(np.mean([c.information for c in candidates])),
              "chosen_mean_information": float(np.mean([c.information for c in chosen]))}
    _write_draft(pool, chosen, Path(out), version, result)
    return result


def _write_draft(pool: Suite, chosen: list[Candidate], out: Path, version: str, result: dict) -> None:
    """The draft suite, in one change (videos, suite files, truth, proposal): all of it, or nothing, lands."""
    if out.exists() and any(p.name != ".lock" for p in out.iterdir()):
        raise FileExistsError(f"output folder {out} is not empty; pass a new or empty folder")
    by_id = {c.scenario_id: c for c in chosen}
    scenarios = []
    for s in pool.scenarios:
        c = by_id.get(s.scenario_id)
        if c is None:
            continue
        tags = [t for t in s.tags if not t.startswith(VERSION_PREFIX)] + [version_tag(version), PROPOSED_TAG]
        metadata = {**s.metadata, "predicted_difficulty": c.difficulty, "predicted_difficulty_ci": c.difficulty_ci,
                    "predicted_chance": c.chances, "predicted_information": c.information}
        scenarios.append(dataclasses.replace(s, tags=tags, metadata=metadata))
    continuations = [c for c in pool.continuations if c.scenario_id in by_id]
    ids = {c.continuation_id for c in continuations}
    # every video a regular file inside the pool (a symlink that leads out, a FIFO or a device is refused)
    sources = {c.video: resolve_under(pool.root, c.video, what=f"the pool's video of {c.continuation_id}")
               for c in continuations}
    info = dataclasses.replace(pool.info, version=version, description=f"draft of {version}: {len(chosen)} scenarios "
                               f"proposed from {pool.root} by `autorater suite propose` ({result['predicted_by']})",
                               source={**pool.info.source, "proposed_from": str(pool.root)})
    truth = pool.root / TRUTH_FILE
    truths = [t for t in _truth_lines(resolve_under(pool.root, TRUTH_FILE, what=TRUTH_FILE))
              if t.get("continuation_id") in ids] if truth.exists() or truth.is_symlink() else None
    with FolderChange(out) as change:
        for video, source in sources.items():
            change.place_file(video, source, link=True)
        Suite(out, info, scenarios, continuations, [a for a in pool.annotations if a.continuation_id in ids],
              [r for r in pool.references if r.continuation_id in ids]).write(out, change=change)
        if truths is not None:
            change.write_bytes(TRUTH_FILE, jsonl_bytes(truths))
        change.write_text(PROPOSAL_FILE, json_text(result))


def format_proposal(result: dict, limit: int = 30) -> str:
    """The proposal as the CLI prints it: the chosen scenarios with their predicted difficulty and chances."""
    agents = list(result["abilities"])
    lines = [f"proposed {len(result['chosen'])} of {result['candidates']} candidate scenarios for {result['version']} "
             f"(difficulty predicted from {result['predicted_by']}; balanced over categories: {result['balanced']})",
             f"mean information about today's agents: chosen {result['chosen_mean_information']:.2f}, pool "
             f"{result['pool_mean_information']:.2f} (sum over agents of p(1-p))",
             f"{'scenario':<10}{'category':<14}{'difficulty [95% interval]':<28}{'mean chance':>12}  chance of "
             + ", ".join(agents)]
    for c in result["chosen"][:limit]:
        chances = " ".join(f"{c['chances'][a]:.2f}" for a in agents if a in c["chances"])
        lines.append(f"{c['scenario_id']:<10}{c['category'][:13]:<14}{c['difficulty']:+6.2f} "
                     f"[{c['difficulty_ci'][0]:+.2f}, {c['difficulty_ci'][1]:+.2f}]{'':<5}{c['mean_chance']:>10.2f}  "
                     f"{chances}")
    if len(result["chosen"]) > limit:
        lines.append(f"... and {len(result['chosen']) - limit} more ({PROPOSAL_FILE})")
    return "\n".join(lines)


__all__ = ["MAX_PREDICTIONS_BYTES", "PRIOR_INFORMATION", "PROPOSAL_FILE", "PROPOSED_TAG", "Candidate", "choose",
           "fit_candidates", "format_proposal", "pair_weights", "pool_predictions", "propose_version",
           "read_predictions"]
