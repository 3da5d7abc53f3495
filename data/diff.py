"""``autorater suite diff OLD NEW``: what changed between two versions of one suite.

Scenarios are matched by ``scenario_id`` and continuations by ``continuation_id``. A scenario present in both is
*changed* when its instruction, category, tags or takeover differ, or when the videos of its continuations do (by
content: the SHA-1 of each file, so a re-encoded or re-recorded video counts and a moved one does not; only regular
files inside the suite are read, never a symlink that leads out, a FIFO or a device). A
continuation present in both is changed when its agent, scenario, takeover or video content differ. Labels are
compared per continuation present in both: the annotations as a multiset of (annotator, outcome, marker, failure
mode), and the gold reference. Every count is also given per category and per tag (a scenario counts under the
category and tags it has in either version).

Two suites with different ``name`` s are not versions of one suite: diffing them is an error unless ``force``.

Example:
    >>> diff = diff_suites(Suite.load("suite-v1"), Suite.load("suite-v2"))       # doctest: +SKIP
    >>> print(format_diff(diff)); diff.differ                                    # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, field

from autorater.data.paths import PathError, open_regular, printable, resolve_under
from autorater.data.suite import Suite

KINDS = ("scenarios_added", "scenarios_removed", "scenarios_changed", "continuations_added",
         "continuations_removed", "continuations_changed", "labels_changed", "references_changed")


@dataclass
class SuiteDiff:
    """What changed from ``old`` to ``new`` (both ``name@version``); ``differ`` when anything did."""

    old: str
    new: str
    scenarios_added: list[str] = field(default_factory=list)
    scenarios_removed: list[str] = field(default_factory=list)
    scenarios_changed: dict[str, dict] = field(default_factory=dict)  # id -> field -> {"old", "new"}
    scenarios_unchanged: int = 0
    continuations_added: list[str] = field(default_factory=list)
    continuations_removed: list[str] = field(default_factory=list)
    continuations_changed: dict[str, dict] = field(default_factory=dict)
    labels_changed: dict[str, dict] = field(default_factory=dict)  # continuation -> {"added": n, "removed": n}
    references_changed: dict[str, dict] = field(default_factory=dict)  # continuation -> {"old", "new"}
    by_category: dict[str, dict[str, int]] = field(default_factory=dict)
    by_tag: dict[str, dict[str, int]] = field(default_factory=dict)
    videos_compared: str = "content"  # "content" (SHA-1) or "path"

    @property
    def differ(self) -> bool:
        return any(getattr(self, kind) for kind in KINDS)

    def to_dict(self) -> dict:
        return {**asdict(self), "differ": self.differ}


def _video_ids(suite: Suite, by_content: bool) -> dict[str, str]:
    """continuation id -> the video's SHA-1 (or its path; a missing file is named as such).

    Only a regular file inside the suite is read: a symlink that leads out, a FIFO or a device (``/dev/zero``) is
    named (``outside:``, ``not_file:``), never hashed."""
    out = {}
    for c in suite.continuations:
        if not by_content:
            out[c.continuation_id] = c.video
            continue
        try:
            with open_regular(resolve_under(suite.root, c.video, what="video")) as f:
                h = hashlib.sha1()
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            out[c.continuation_id] = h.hexdigest()
        except PathError as err:
            out[c.continuation_id] = f"{err.kind}:{c.video}"
        except OSError:
            out[c.continuation_id] = f"missing:{c.video}"
    return out


def _scenario_changes(old, new, old_videos: list[str], new_videos: list[str]) -> dict:
    changes = {}
    for name in ("instruction", "category", "takeover_s"):
        if getattr(old, name) != getattr(new, name):
            changes[name] = {"old": getattr(old, name), "new": getattr(new, name)}
    if list(old.tags) != list(new.tags):
        changes["tags"] = {"added": [t for t in new.tags if t not in old.tags],
                           "removed": [t for t in old.tags if t not in new.tags], "old": list(old.tags),
                           "new": list(new.tags)}
    if sorted(old_videos) != sorted(new_videos):
        gone, came = Counter(old_videos) - Counter(new_videos), Counter(new_videos) - Counter(old_videos)
        changes["videos"] = {"added": sum(came.values()), "removed": sum(gone.values())}
    return changes


def _continuation_changes(old, new, old_video: str, new_video: str, old_suite: Suite, new_suite: Suite) -> dict:
    changes = {}
    for name in ("agent_id", "scenario_id"):
        if getattr(old, name) != getattr(new, name):
            changes[name] = {"old": getattr(old, name), "new": getattr(new, name)}
    takeover = old_suite.takeover_of(old.continuation_id), new_suite.takeover_of(new.continuation_id)
    if takeover[0] != takeover[1]:
        changes["takeover_s"] = {"old": takeover[0], "new": takeover[1]}
    if old_video != new_video:
        changes["video"] = {"old": old.video, "new": new.video}
    return changes


def _labels(suite: Suite) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for a in suite.annotations:
        out.setdefault(a.continuation_id, Counter())[(a.annotator_id, a.outcome, a.marker_s, a.failure_mode)] += 1
    return out


def _reference(suite: Suite) -> dict[str, dict]:
    return {r.continuation_id: {"outcome": r.outcome, "marker_s": r.marker_s, "failure_mode": r.failure_mode}
            for r in suite.references}


def diff_suites(old: Suite, new: Suite, force: bool = False, videos: bool = True) -> SuiteDiff:
    """What changed from ``old`` to ``new`` (see the module docstring).

    Args:
        old, new: two versions of one suite.
        force: diff suites with different names (not versions of one suite) all the same.
        videos: compare videos by content (SHA-1 of each file); False: by path only.

    Raises:
        ValueError: the suites have different names and ``force`` is not set.
    """
    if old.info.name != new.info.name and not force:
        raise ValueError(f"{old.root} is suite {old.info.name!r} and {new.root} is suite {new.info.name!r}: not two "
                         f"versions of one suite (fix: pass two versions of the same suite, or --force to diff them "
                         f"anyway)")
    diff = SuiteDiff(f"{old.info.name}@{old.info.version}", f"{new.info.name}@{new.info.version}",
                     videos_compared="content" if videos else "path")
    old_v, new_v = _video_ids(old, videos), _video_ids(new, videos)
    per_scenario_old, per_scenario_new = _videos_by_scenario(old, old_v), _videos_by_scenario(new, new_v)
    for s in new.scenarios:
        before = old.scenario_by_id.get(s.scenario_id)
        if before is None:
            diff.scenarios_added.append(s.scenario_id)
            continue
        changes = _scenario_changes(before, s, per_scenario_old.get(s.scenario_id, []),
                                    per_scenario_new.get(s.scenario_id, []))
        if changes:
            diff.scenarios_changed[s.scenario_id] = changes
        else:
            diff.scenarios_unchanged += 1
    diff.scenarios_removed = [s.scenario_id for s in old.scenarios if s.scenario_id not in new.scenario_by_id]
    for c in new.continuations:
        before = old.continuation_by_id.get(c.continuation_id)
        if before is None:
            diff.continuations_added.append(c.continuation_id)
            continue
        changes = _continuation_changes(before, c, old_v[c.continuation_id], new_v[c.continuation_id], old, new)
        if changes:
            diff.continuations_changed[c.continuation_id] = changes
    diff.continuations_removed = [c.continuation_id for c in old.continuations
                                  if c.continuation_id not in new.continuation_by_id]
    _compare_labels(diff, old, new)
    diff.by_category, diff.by_tag = _breakdown(diff, old, new)
    return diff


def _videos_by_scenario(suite: Suite, videos: dict[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in suite.continuations:
        out.setdefault(c.scenario_id, []).append(videos[c.continuation_id])
    return out


def _compare_labels(diff: SuiteDiff, old: Suite, new: Suite) -> None:
    old_labels, new_labels = _labels(old), _labels(new)
    old_refs, new_refs = _reference(old), _reference(new)
    for c in new.continuations:
        cid = c.continuation_id
        if cid not in old.continuation_by_id:
            continue
        before, after = old_labels.get(cid, Counter()), new_labels.get(cid, Counter())
        if before != after:
            diff.labels_changed[cid] = {"added": sum((after - before).values()),
                                        "removed": sum((before - after).values())}
        if old_refs.get(cid) != new_refs.get(cid):
            diff.references_changed[cid] = {"old": old_refs.get(cid), "new": new_refs.get(cid)}


def _breakdown(diff: SuiteDiff, old: Suite, new: Suite) -> tuple[dict, dict]:
    """Counts per category and per tag: a scenario counts under the categories and tags it has in either suite, a
    continuation under its scenario's."""
    def keys(sid: str) -> tuple[set[str], set[str]]:
        found = [s for s in (old.scenario_by_id.get(sid), new.scenario_by_id.get(sid)) if s is not None]
        return {s.category for s in found}, {t for s in found for t in s.tags}

    def scenario_of(cid: str) -> str:
        c = new.continuation_by_id.get(cid) or old.continuation_by_id[cid]
        return c.scenario_id

    counts: dict[str, dict[str, dict[str, int]]] = {"category": {}, "tag": {}}

    def count(sid: str, kind: str) -> None:
        categories, tags = keys(sid)
        for axis, names in (("category", categories), ("tag", tags)):
            for name in names:
                row = counts[axis].setdefault(name, dict.fromkeys(KINDS + ("scenarios_unchanged",), 0))
                row[kind] += 1

    for s in new.scenarios:
        count(s.scenario_id, "scenarios_added" if s.scenario_id in diff.scenarios_added else
              "scenarios_changed" if s.scenario_id in diff.scenarios_changed else "scenarios_unchanged")
    for sid in diff.scenarios_removed:
        count(sid, "scenarios_removed")
    for kind in ("continuations_added", "continuations_removed", "continuations_changed", "labels_changed",
                 "references_changed"):
        for cid in getattr(diff, kind):
            count(scenario_of(cid), kind)
    return dict(sorted(counts["category"].items())), dict(sorted(counts["tag"].items()))


_SHORT = {"scenarios_added": "scen+", "scenarios_removed": "scen-", "scenarios_changed": "scen~",
          "scenarios_unchanged": "scen=", "continuations_added": "cont+", "continuations_removed": "cont-",
          "continuations_changed": "cont~", "labels_changed": "labels~", "references_changed": "gold~"}


def _table(title: str, rows: dict[str, dict[str, int]]) -> list[str]:
    if not rows:
        return []
    width = max(12, *(len(k) for k in rows)) + 2
    lines = [f"{title:<{width}}" + "".join(f"{_SHORT[k]:>8}" for k in _SHORT)]
    lines += [f"{name:<{width}}" + "".join(f"{row[k]:>8}" for k in _SHORT) for name, row in rows.items()]
    return lines


def _ids(ids, limit: int = 12) -> str:
    ids = list(ids)
    return ", ".join(ids[:limit]) + (f" ... and {len(ids) - limit} more" if len(ids) > limit else "")


def format_diff(diff: SuiteDiff, limit: int = 20) -> str:
    """A readable summary: the counts, the tables per category and tag, and the first changed scenarios."""
    lines = [f"diff {diff.old} -> {diff.new} (videos compared by {diff.videos_compared})",
             f"scenarios: {len(diff.scenarios_added)} added, {len(diff.scenarios_removed)} removed, "
             f"{len(diff.scenarios_changed)} changed, {diff.scenarios_unchanged} unchanged",
             f"continuations: {len(diff.continuations_added)} added, {len(diff.continuations_removed)} removed, "
             f"{len(diff.continuations_changed)} changed; labels changed on {len(diff.labels_changed)} "
             f"continuation(s), gold references on {len(diff.references_changed)}"]
    if diff.scenarios_added:
        lines.append(f"added: {_ids(diff.scenarios_added)}")
    if diff.scenarios_removed:
        lines.append(f"removed: {_ids(diff.scenarios_removed)}")
    for sid, changes in list(diff.scenarios_changed.items())[:limit]:
        lines.append(f"changed {sid}: " + "; ".join(_change_text(k, v) for k, v in changes.items()))
    if len(diff.scenarios_changed) > limit:
        lines.append(f"... and {len(diff.scenarios_changed) - limit} more changed scenarios (see --json)")
    lines += _table("category", diff.by_category) + _table("tag", diff.by_tag)
    lines.append("the suites differ" if diff.differ else "the suites are the same")
    return "\n".join(printable(line) for line in lines)  # ids and instructions are the suites' text


def _change_text(name: str, change: dict) -> str:
    if name == "tags":
        return "tags " + " ".join([f"+{t}" for t in change["added"]] + [f"-{t}" for t in change["removed"]] or
                                  ["reordered"])
    if name == "videos":
        return f"videos +{change['added']} -{change['removed']}"
    return f"{name} {str(change['old'])[:60]!r} -> {str(change['new'])[:60]!r}"


__all__ = ["KINDS", "SuiteDiff", "diff_suites", "format_diff"]
