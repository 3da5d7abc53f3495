"""Scores across suite versions and tags: ``autorater leaderboard`` over several labels folders (or suites).

Each source is a labels folder (after ``ingest``) or a suite whose annotations are the labels (their majority per
continuation, a human label). Every continuation belongs to the version its scenario came in: the scenario's
``version:`` tag, else its suite's version. So several labels folders (one per version) and one suite whose
scenarios carry several version tags are read alike; a continuation given by two sources (a grown suite labelled
again) counts once, from the later source.

Every cell (an agent on a version, on the union of the versions, on a category or a chosen tag of each) is the
leaderboard's estimate: ``calibration.agents.rates.group_estimates`` over the cell's slice, so the labels are corrected
by the gold references exactly as ``autorater leaderboard`` does on one folder, with its 95% interval. Between two
versions, the rank agreement is Spearman's correlation of the agents' label shares, with a percentile bootstrap
interval that resamples the scenarios of each version. The saturation of each version is
``serving.analysis.saturation``'s.

Example:
    >>> board = version_board(["labels-v1", "labels-v2"], by_tags=["hard"])     # doctest: +SKIP
    >>> board["agents"]["expert"]["versions"]["v2"]["ci"]                       # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from autorater.calibration.agents.rates import group_estimates
from autorater.data.suite import Suite
from autorater.data.versions import scenario_version, version_key
from autorater.serving.labelling.folder import JOB_FILE, LabelsFolder

UNION = "all versions"


@dataclass
class Source:
    """One labels folder or suite, read: its suite and its label rows (as ``labels.jsonl``'s, plus the suite's
    fields: ``agent_id``, ``scenario_id``, ``category``, ``tags``, ``version``)."""

    path: Path
    kind: str  # "labels" | "suite"
    suite: Suite
    rows: list[dict]


def suite_rows(suite: Suite) -> list[dict]:
    """Label rows from a suite's own annotations: per continuation, the annotators' majority (ties: failure), a
    human label; a continuation nobody labelled waits (``outcome`` None)."""
    from autorater.data.labels import label_table, majority_vote

    votes = majority_vote(label_table(suite.annotations)) if suite.annotations else None
    rows = []
    for c in suite.continuations:
        voted = votes is not None and c.continuation_id in votes.index
        outcome = votes.loc[c.continuation_id, "outcome"] if voted else None
        marker = float(votes.loc[c.continuation_id, "marker_s"]) if voted else None
        rows.append({"continuation_id": c.continuation_id, "decision": "human", "audit": False, "outcome": outcome,
                     "human_outcome": outcome, "marker_s": None if marker is None or np.isnan(marker) else marker,
                     "label_source": "human"})
    return rows


def read_source(path: str | os.PathLike) -> Source:
    """A labels folder (it holds ``job.json``) or a suite folder (``suite.json``), with its rows."""
    path = Path(path)
    if (path / JOB_FILE).is_file():
        job, rows = LabelsFolder(path).read_certified(hint=" (and `autorater ingest` the human labels)")
        return Source(path, "labels", Suite.load(job["suite"]), [dict(r) for r in rows])
    if (path / "suite.json").is_file():
        suite = Suite.load(path)
        return Source(path, "suite", suite, suite_rows(suite))
    raise FileNotFoundError(f"{path} is neither a labels folder (job.json, written by `autorater label`) nor a suite "
                            f"(suite.json) (fix: pass the folder autorater label wrote, or a suite folder)")


def merged_rows(sources: list[Source]) -> tuple[list[dict], dict[str, str]]:
    """Every source's rows with their suite's fields and version, one per (version, continuation), and the gold
    outcomes, keyed alike (``continuation_id`` becomes ``VERSION/ID``)."""
    rows: dict[str, dict] = {}
    gold: dict[str, str] = {}
    for source in sources:
        suite = source.suite
        references = {r.continuation_id: r.outcome for r in suite.references}
        for r in source.rows:
            c = suite.get(r["continuation_id"])
            scenario = suite.scenario_by_id[c.scenario_id]
            version = scenario_version(scenario.tags, suite.info.version)
            key = f"{version}/{c.continuation_id}"
            rows[key] = {**r, "continuation_id": key, "agent_id": c.agent_id,
                         "scenario_id": f"{version}/{c.scenario_id}", "category": scenario.category,
                         "tags": list(scenario.tags), "version": version,
                         "source": str(source.path)}
            gold.pop(key, None)
            if c.continuation_id in references:
                gold[key] = references[c.continuation_id]
    return list(rows.values()), gold


def _cells(rows: list[dict], gold: dict[str, str], seed: int) -> dict[str, dict]:
    """Per agent of ``rows``: the leaderboard's estimate (rate, 95% interval, how) on these rows."""
    if not rows:
        return {}
    estimates, pooling = group_estimates(rows, gold, "agent_id", seed)
    out = {}
    for agent, est in estimates.items():
        mine = [r for r in rows if r["agent_id"] == agent]
        out[agent] = {"rate": est["rate"], "ci": list(est["ci"]), "labelled_rate": est["labelled_rate"],
                      "n": sum(r.get("outcome") is not None for r in mine),
                      "waiting": sum(r.get("outcome") is None for r in mine), "method": est["method"],
                      "pooled": pooling["pooled"]}
    return out


def _slices(rows: list[dict], versions: list[str]) -> dict[str, list[dict]]:
    return {**{v: [r for r in rows if r["version"] == v] for v in versions}, UNION: rows}


def version_board(paths: list[str | os.PathLike], by_tags: tuple[str, ...] | list[str] = (), seed: int = 0,
                  n_boot: int = 1000, saturation: bool = True) -> dict:
    """The cross-version leaderboard of ``paths`` (labels folders or suites; see the module docstring).

    Args:
        paths: the sources, oldest first (a continuation given twice counts from the later one).
        by_tags: tags to break the scores down by, beside the categories (each must be on some scenario).
        seed: seed of the permutation tests and bootstraps.
        n_boot: bootstrap resamples of the rank agreement.
        saturation: add each version's saturation (``serving.analysis.saturation.saturation``).

    Raises:
        ValueError: a version with no labels, or a tag that no scenario carries (each with the fix).
    """
    sources = [read_source(p) for p in paths]
    rows, gold = merged_rows(sources)
    versions = sorted({r["version"] for r in rows}, key=version_key)
    for v in versions:
        if not any(r["version"] == v and r.get("outcome") is not None for r in rows):
            where = sorted({r["source"] for r in rows if r["version"] == v})
            raise ValueError(f"version {v!r} has no labels (from {', '.join(where)}): nothing to score it on (fix: "
                             f"label it with `autorater label` and `autorater ingest` the human labels, or leave it "
                             f"out)")
    all_tags = {t for r in rows for t in r["tags"]}
    unknown = [t for t in by_tags if t not in all_tags]
    if unknown:
        raise ValueError(f"unknown tag(s) {', '.join(map(repr, unknown))}: no scenario carries them (fix: pick tags "
                         f"that are there, e.g. {', '.join(sorted(all_tags)[:8]) or 'none yet'}; add them with "
                         f"`autorater suite tag`)")
    slices = _slices(rows, versions)
    agents = sorted({r["agent_id"] for r in rows})
    cells = {name: _cells(part, gold, seed) for name, part in slices.items()}
    board = {"sources": [{"path": str(s.path), "kind": s.kind, "suite": f"{s.suite.info.name}@{s.suite.info.version}"}
                         for s in sources],
             "versions": versions, "union": UNION, "agents": {}, "categories": {}, "tags": {},
             "counts": {name: {"continuations": len(part), "scenarios": len({r["scenario_id"] for r in part}),
                               "labelled": sum(r.get("outcome") is not None for r in part)}
                        for name, part in slices.items()}}
    for agent in agents:
        board["agents"][agent] = {"versions": {v: cells[v].get(agent) for v in versions},
                                  "union": cells[UNION].get(agent)}
    for cat in sorted({r["category"] for r in rows}):
        board["categories"][cat] = {name: _cells([r for r in part if r["category"] == cat], gold, seed)
                                    for name, part in slices.items()}
    for tag in by_tags:
        board["tags"][tag] = {name: _cells([r for r in part if tag in r["tags"]], gold, seed)
                              for name, part in slices.items()}
    board["ranking"] = sorted(agents, key=lambda a: -((board["agents"][a]["union"] or {}).get("rate") or 0))
    board["rank_agreement"] = rank_agreement({v: slices[v] for v in versions}, seed=seed, n_boot=n_boot)
    if saturation:
        from autorater.serving.analysis.saturation import saturation as saturation_of

        board["saturation"] = {v: saturation_of(slices[v], gold, {a: cells[v].get(a) for a in agents})
                               for v in versions}
    return board


def _share_matrix(rows: list[dict], agents: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(agents, scenarios) successes and labelled counts of one version's rows."""
    scenarios = sorted({r["scenario_id"] for r in rows})
    index_a, index_s = {a: i for i, a in enumerate(agents)}, {s: j for j, s in enumerate(scenarios)}
    wins, counts = np.zeros((len(agents), len(scenarios))), np.zeros((len(agents), len(scenarios)))
    for r in rows:
        if r.get("outcome") is not None and r["agent_id"] in index_a:
            i, j = index_a[r["agent_id"]], index_s[r["scenario_id"]]
            counts[i, j] += 1
            wins[i, j] += r["outcome"] == "success"
    return wins, counts


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(b,) Spearman correlation of each row of ``x`` with the same row of ``y`` (both (b, agents)); NaN where a
    row is constant."""
    rx, ry = stats.rankdata(x, axis=1), stats.rankdata(y, axis=1)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    den = np.sqrt((rx ** 2).sum(1) * (ry ** 2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(1) / np.where(den > 0, den, 1), np.nan)


def rank_agreement(by_version: dict[str, list[dict]], seed: int = 0, n_boot: int = 1000,
                   level: float = 0.95) -> list[dict]:
    """For each pair of versions: Spearman's correlation of the label shares of the agents both scored, with a
    percentile bootstrap interval (the scenarios of each version resampled, independently)."""
    rng = np.random.default_rng(seed)
    versions = list(by_version)
    out = []
    for i, a in enumerate(versions):
        for b in versions[i + 1:]:
            agents = sorted({r["agent_id"] for r in by_version[a] if r.get("outcome") is not None} &
                            {r["agent_id"] for r in by_version[b] if r.get("outcome") is not None})
            entry = {"versions": [a, b], "agents": len(agents), "spearman": None, "ci": [None, None]}
            if len(agents) >= 3:
                shares = []
                for v in (a, b):
                    wins, counts = _share_matrix(by_version[v], agents)
                    weights = rng.multinomial(counts.shape[1], np.full(counts.shape[1], 1 / counts.shape[1]),
                                              size=n_boot)  # (n_boot, scenarios)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        shares.append((wins.sum(1) / counts.sum(1), (weights @ wins.T) / (weights @ counts.T)))
                point = _spearman_rows(shares[0][0][None], shares[1][0][None])[0]
                boot = _spearman_rows(np.nan_to_num(shares[0][1], nan=0.5), np.nan_to_num(shares[1][1], nan=0.5))
                tail = 50 * (1 - level)
                lo, hi = np.nanpercentile(boot, [tail, 100 - tail]) if np.isfinite(boot).any() else (np.nan, np.nan)
                entry.update(spearman=None if np.isnan(point) else float(point),
                             ci=[None if np.isnan(lo) else float(lo), None if np.isnan(hi) else float(hi)])
            out.append(entry)
    return out


__all__ = ["UNION", "Source", "merged_rows", "rank_agreement", "read_source", "suite_rows", "version_board"]
