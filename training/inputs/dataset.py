"""Training examples from suites: aggregated human labels joined to the videos' instructions and times.

The model learns from the annotators' aggregate (Dawid-Skene posterior as a soft label by default),
never from a suite's reference episodes (they are kept to calibrate and measure it).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from autorater.data.labels import aggregate, label_table
from autorater.data.suite import SWAP_TAG, Suite


@dataclass
class Examples:
    """Parallel lists/arrays, one row per labelled continuation."""

    suite_index: list[int] = field(default_factory=list)  # which suite of the list each row comes from
    continuation_ids: list[str] = field(default_factory=list)
    scenario_keys: list[str] = field(default_factory=list)  # "<suite>/<scenario_id>", for grouped splits
    task_keys: list[str] = field(default_factory=list)  # what the instruction asks (task_key): rows of one task are
    #                                                     never each other's instruction negatives
    video_paths: list[str] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    takeover_s: list[float] = field(default_factory=list)
    p_success: list[float] = field(default_factory=list)  # soft label
    marker_s: list[float] = field(default_factory=list)  # NaN when no marker
    failure_mode: list[str | None] = field(default_factory=list)
    swapped: list[bool] = field(default_factory=list)  # the scenario's instruction is a swap (tag SWAP_TAG)
    paraphrases: list[list[str]] = field(default_factory=list)  # other wordings of the row's task (scenario metadata
    #                                                              ``paraphrases``): the same success, never negatives
    twins: list[str | None] = field(default_factory=list)  # "<suite>/<continuation id>" of the other view of the same
    #                                                         rollout (continuation metadata ``twin``), or None

    def __len__(self) -> int:
        return len(self.continuation_ids)

    def subset(self, rows: Sequence[int]) -> "Examples":
        """These rows only (a field some older pack lacks stays empty)."""
        return Examples(**{k: [getattr(self, k)[i] for i in rows] if getattr(self, k) else []
                           for k in self.__dataclass_fields__})


def _majority_failure_mode(table: pd.DataFrame) -> pd.Series:
    modes = table[(table["outcome"] == "failure") & table["failure_mode"].notna()]
    return modes.groupby("continuation_id")["failure_mode"].agg(lambda s: Counter(s).most_common(1)[0][0])


def task_key(scenario) -> str:
    """What a scenario's instruction asks, across wordings: its ``metadata.task`` when the suite names one (the
    generator does: ``drawer-open-v3``; a team can write its own task ids there; a swapped instruction asks
    ``metadata.instruction_spec.task``, the task it swapped in, not the video's), else its instruction's words,
    lower-cased (two scenarios worded alike ask the same). Two paraphrases of one task describe the same success,
    so an instruction of the same task is never used as a clip's negative (training/train.py)."""
    meta = scenario.metadata or {}
    spec = meta.get("instruction_spec") if SWAP_TAG in (scenario.tags or []) else None
    task = spec.get("task") if isinstance(spec, dict) else meta.get("task")  # a swap asks the task it swapped in
    if isinstance(task, str) and task.strip():
        return "task:" + task.strip()
    return "words:" + " ".join(re.findall(r"[a-z0-9]+", scenario.instruction.lower()))


def _append(ex: Examples, suite: Suite, si: int, c) -> None:
    """Append the unlabelled fields of continuation ``c`` of suite number ``si``."""
    scenario = suite.scenario_by_id[c.scenario_id]
    ex.suite_index.append(si)
    ex.continuation_ids.append(c.continuation_id)
    ex.scenario_keys.append(f"{si}/{c.scenario_id}")
    ex.task_keys.append(task_key(scenario))
    ex.video_paths.append(str(suite.root / c.video))
    ex.instructions.append(scenario.instruction)
    ex.categories.append(scenario.category)
    ex.takeover_s.append(suite.takeover_of(c.continuation_id))
    ex.swapped.append(SWAP_TAG in (scenario.tags or []))
    wordings = (scenario.metadata or {}).get("paraphrases") or []
    ex.paraphrases.append([w for w in wordings if isinstance(w, str) and w.strip() and w != scenario.instruction])
    twin = (c.metadata or {}).get("twin")
    ex.twins.append(f"{si}/{twin}" if isinstance(twin, str) and twin else None)


def suite_examples(suite: Suite, ids: Sequence[str] | None = None) -> Examples:
    """Unlabelled examples (NaN labels) for ``ids`` of a suite, in that order: inputs for prediction."""
    ex = Examples()
    for cid in ids if ids is not None else suite.continuation_ids():
        _append(ex, suite, 0, suite.get(cid))
        ex.p_success.append(float("nan"))
        ex.marker_s.append(float("nan"))
        ex.failure_mode.append(None)
    return ex


def build_examples(suites: Sequence[Suite], aggregation: str = "dawid_skene", exclude_references: bool = True,
                   ids: Sequence[set[str] | None] | None = None) -> Examples:
    """Join aggregated annotations to the continuations of each suite.

    Args:
        suites: training suites.
        aggregation: ``dawid_skene`` (soft posterior) or ``majority`` (share of success votes).
        exclude_references: leave out the suites' reference episodes, every scenario that holds one (its scene and
            camera stay unseen, so the references measure the model on unseen scenarios) and every continuation of
            another suite that shows one of their videos (a suite's instruction swaps hard-link its videos).
        ids: optional per-suite sets of continuation ids to keep.
    """
    ex = Examples()
    unseen = _reference_videos(suites) if exclude_references else set()
    for si, suite in enumerate(suites):
        table = label_table(suite.annotations)
        if table.empty:
            continue
        agg = aggregate(table, aggregation)
        modes = _majority_failure_mode(table)
        refs = {r.continuation_id for r in suite.references} if exclude_references else set()
        held = {suite.continuation_by_id[cid].scenario_id for cid in refs if cid in suite.continuation_by_id}
        keep = ids[si] if ids is not None else None
        for c in suite.continuations:
            cid = c.continuation_id
            if cid not in agg.index or cid in refs or c.scenario_id in held or (keep is not None and cid not in keep):
                continue
            if unseen and _video_identity(suite.root / c.video) in unseen:
                continue
            _append(ex, suite, si, c)
            ex.p_success.append(float(agg.at[cid, "p_success"]))
            ex.marker_s.append(float(agg.at[cid, "marker_s"]))
            ex.failure_mode.append(modes.get(cid))
    if not len(ex):
        raise ValueError("no labelled continuations to train on: the suites have no annotations.jsonl "
                         "(or every annotated continuation is a reference episode)")
    return ex


def _video_identity(path) -> tuple[int, int] | None:
    """(device, inode) of a video file: one file under two names (a hard link) is one video."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _reference_videos(suites: Sequence[Suite]) -> set[tuple[int, int]]:
    """The files of every video of the scenarios that hold a reference, in any of ``suites``."""
    out = set()
    for suite in suites:
        held = {suite.continuation_by_id[r.continuation_id].scenario_id for r in suite.references
                if r.continuation_id in suite.continuation_by_id}
        out |= {_video_identity(suite.root / c.video) for c in suite.continuations if c.scenario_id in held}
    return out - {None}


def marker_indices(marker_s: np.ndarray, times_s: np.ndarray, durations_s: np.ndarray) -> np.ndarray:
    """The sampled frame nearest each marker, or ``t`` (the "end" bin) past the last frame; -1 when NaN.

    Args:
        marker_s: (n,) seconds; times_s: (n, t) sampled frame times; durations_s: (n,).
    """
    n, t = times_s.shape
    out = np.full(n, -1, dtype=np.int64)
    ok = np.isfinite(marker_s)
    if not ok.any():
        return out
    step = np.where(t > 1, times_s[:, -1] - times_s[:, -2], durations_s)
    nearest = np.abs(times_s - marker_s[:, None]).argmin(1)
    end = marker_s > times_s[:, -1] + step / 2
    out[ok] = np.where(end, t, nearest)[ok]
    return out
