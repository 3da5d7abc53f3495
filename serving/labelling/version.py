"""A labelled version's state, rebuilt from what cannot change: the sealed plan, certify's journal and the human labels.

``labels.jsonl``, ``summary.json``'s ``certification`` and the human queue are *derived*: every run of ``autorater
label`` or ``certify`` writes them from :class:`VersionState` (the plan's strata and model-0 audits, folded with the
journal's rounds and challenger commits) and the human labels of the ingest history. Nothing a run decides is read back
from them, so an edited ``labels.jsonl`` or ``summary.json`` certifies nothing, and a run killed between its writes is
finished, byte for byte, by the next one.

The journal (``rounds.jsonl``) is a hash chain: each record carries ``chain``, the SHA-256 of the previous record's
``chain`` and its own canonical JSON, so an edited, dropped or reordered record is refused naming its line.

Example:
    >>> state = VersionState.fold(plan, folder.read_journal())             # doctest: +SKIP
    >>> rows, queue = derive_rows(base, state, ratings, human)             # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Mapping, Sequence

from autorater.serving.labelling.rounds import ModelPlan, Round, Rules, StratumState


def chain_of(previous: str, record: dict) -> str:
    """The journal's hash chain: SHA-256 of the previous record's chain and this record (without its own)."""
    body = json.dumps({k: v for k, v in record.items() if k != "chain"}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)
    return hashlib.sha256((previous + body).encode("utf-8", "surrogatepass")).hexdigest()


def chained(records: Sequence[dict], record: dict) -> dict:
    """``record`` with its link to the journal ``records``."""
    previous = records[-1]["chain"] if records else ""
    return {**record, "chain": chain_of(previous, record)}


def check_chain(records: Sequence[dict]) -> int | None:
    """The 1-based number of the first record that breaks the chain (edited, dropped, reordered), or None."""
    previous = ""
    for number, record in enumerate(records, 1):
        if record.get("chain") != chain_of(previous, record):
            return number
        previous = record["chain"]
    return None


def rules_of(plan: Mapping) -> Rules:
    """The rules the label-time plan fixed (the target, the claim, the budgets and model shares, adaptation)."""
    strata = plan["strata"]
    return Rules(target=float(plan["target"]), delta=1 - float(plan["confidence"]), claim=plan["claim"],
                 budget=plan.get("audit_budget"),
                 strata_budget={k: float(s["budget"]) for k, s in strata.items() if s.get("budget") is not None},
                 weights={k: tuple(float(w) for w in s.get("weights") or (1.0,)) for k, s in strata.items()},
                 adapt_after=int((plan.get("adapt") or {}).get("after", 10)), seed=int(plan["seed"]))


@dataclasses.dataclass
class VersionState:
    """Where a labelled version stands: each stratum's models (in succession), state and first answers.

    Attributes:
        plan: the sealed label-time plan.
        models: stratum -> its models so far (index 0 first).
        states: stratum -> its :class:`StratumState`.
        first: the audit items' first answers (continuation id -> outcome).
        runs: certify runs recorded.
        challengers: the journal's challenger commits, in order.
        records: the journal as read (the chain's last link is where the next record attaches).
    """

    plan: dict
    models: dict[str, list[ModelPlan]]
    states: dict[str, StratumState]
    first: dict[str, str]
    runs: int = 0
    challengers: list[dict] = dataclasses.field(default_factory=list)
    records: list[dict] = dataclasses.field(default_factory=list)

    @classmethod
    def fold(cls, plan: dict, records: Sequence[dict]) -> VersionState:
        """The plan's strata, then every journal record in order."""
        models = {k: [ModelPlan.from_dict(s["model"])] for k, s in plan["strata"].items() if s.get("model")}
        state = cls(plan, models, {k: StratumState.from_dict(s["state"]) for k, s in plan["strata"].items()}, {},
                    records=list(records))
        for record in records:
            if record["kind"] == "round":
                state.first.update(record.get("first") or {})
                state.states.update({k: StratumState.from_dict(v) for k, v in (record.get("states") or {}).items()})
                state.runs = int(record["run"])
            else:
                state._commit(record)
        return state

    def _commit(self, record: dict) -> None:
        self.challengers.append(record)
        for d in record["plans"]:
            plan = ModelPlan.from_dict(d)
            self.models.setdefault(plan.stratum, []).append(plan)
            self.states[plan.stratum] = StratumState("audit", plan.index, plan.design.first_batch) \
                if plan.design is not None else StratumState("routed", plan.index, reason="nothing_to_certify")

    def current(self) -> dict[str, ModelPlan]:
        """Each stratum's current model's plan (strata that never had a model are left out)."""
        return {k: ms[self.states[k].model] for k, ms in self.models.items() if self.states[k].model < len(ms)}

    def round_record(self, rnd: Round, at: str, history_event: int) -> dict | None:
        """The journal record of a round, or None when it changed nothing."""
        changed = {k: s.to_dict() for k, s in rnd.states.items() if s != self.states.get(k)}
        if not changed and not rnd.first:
            return None
        return chained(self.records, {"kind": "round", "run": self.runs + 1, "at": at, "history_event": history_event,
                                      "first": dict(sorted(rnd.first.items())), "states": changed,
                                      "revoked": rnd.revoked})

    def append(self, record: dict) -> None:
        """Take a journal record this run wrote (as a later run reads it back: the same state either way)."""
        record = json.loads(json.dumps(record, sort_keys=True))
        self.records.append(record)
        if record["kind"] == "round":
            self.first.update(record["first"])
            self.states.update({k: StratumState.from_dict(v) for k, v in record["states"].items()})
            self.runs = int(record["run"])
        else:
            self._commit(record)

    def stratum_of(self) -> dict[str, str]:
        return dict(self.plan["stratum_of"])


def human_majority(rows: Sequence[Mapping]) -> dict[str, dict]:
    """continuation id -> ``{"outcome", "marker_s", "n"}``: the majority of its human labels (ties: failure; the
    median marker of the agreeing labels)."""
    from autorater.data.labels import label_table, majority_vote

    if not rows:
        return {}
    agg = majority_vote(label_table(rows))
    out = {}
    for cid, h in agg.iterrows():
        marker = None if h["marker_s"] != h["marker_s"] else round(float(h["marker_s"]), 4)  # NaN -> None
        out[str(cid)] = {"outcome": h["outcome"], "marker_s": marker, "n": int(h["n_labels"])}
    return out


def _rank(plan: ModelPlan) -> dict[str, int]:
    return {cid: i for i, cid in enumerate(plan.order)}


def _decision(cid: str, key: str, st: StratumState, plan: ModelPlan | None, adaptive: bool, reasons: Mapping,
              models: Sequence[ModelPlan]) -> tuple[str, str | None]:
    """(decision, reason) of one rated, not excluded continuation from its stratum's state and current model."""
    if plan is not None and cid in set(plan.order):
        if st.state == "certified":
            return "auto", None
        if st.state == "audit":
            return "provisional", None
    if st.state == "routed":
        return "human", st.reason or "routed"
    if st.state == "learning" and cid in set(st.learning):
        return "human", "learning"
    if any(cid in set(m.order) for m in models[:st.model]):
        return "human", "audit"  # an earlier model's audit item
    base = reasons.get(cid, "below_level") if (plan is None or plan.index == 0) else "below_level"
    if st.state == "certified" or not adaptive:
        return "human", base
    return "human", "deferred"  # a later model may label it: asked when the stratum is decided


def derive_rows(base: Sequence[dict], state: VersionState, ratings: Mapping[str, Mapping[str, dict]],
                human: Mapping[str, dict]) -> tuple[list[dict], list[dict]]:
    """``labels.jsonl``'s rows (in ``base``'s order: the suite's) and the human queue, from the version's state.

    Args:
        base: the labelling job's model's rows (its part files), one per continuation.
        state: the version's state.
        ratings: a challenger's name -> its rows (``ratings.jsonl``) of the continuations it rated.
        human: continuation id -> the humans' majority (``human_majority``): the ingest history's, and the suite's own
            labels of continuations the plan left out as human-labelled.
    """
    plan_doc, stratum_of = state.plan, state.plan["stratum_of"]
    excluded, reasons = plan_doc.get("excluded") or {}, plan_doc.get("reasons") or {}
    adaptive = int((plan_doc.get("adapt") or {}).get("max", 0)) > 0
    current = state.current()
    ranks = {k: _rank(p) for k, p in current.items()}
    rows, queue = [], []
    for b in base:
        cid = b["continuation_id"]
        row = {k: b[k] for k in ("continuation_id", "p_success", "outcome", "marker_s", "failure_mode", "model")
               if k in b}
        key = stratum_of.get(cid)
        if "error" in b:
            row.update(p_success=None, outcome=None, marker_s=None, failure_mode=None, decision="human",
                       audit=False, reason="video_error", error=b["error"])
        else:
            st, plan = state.states.get(key), current.get(key)
            rated = b if plan is None or plan.index == 0 else {**b, **ratings.get(plan.name, {}).get(cid, {})}
            row.update(model=rated.get("model", b.get("model")), p_success=rated["p_success"])
            if cid in excluded:
                decision, reason = "human", excluded[cid]
            elif st is None:
                decision, reason = "human", "uncertain"
            else:
                decision, reason = _decision(cid, key, st, plan, adaptive, reasons, state.models.get(key, []))
            rank = ranks.get(key, {}).get(cid)
            asked = rank is not None and st is not None and rank < st.requested and decision in ("auto", "provisional")
            row.update(decision=decision, audit=asked)
            if reason is not None:
                row["reason"] = reason
            if key is not None:
                row.update(stratum=key, audit_rank=rank)
            if decision == "auto":
                row["certified_by"] = "audit"
            row.update(model_outcome=rated["outcome"], model_marker_s=rated["marker_s"],
                       model_failure_mode=rated.get("failure_mode"), logit=rated["logit"],
                       marker_spread_s=rated.get("marker_spread_s"), duration_s=b.get("duration_s"))
        _label(row, human.get(cid))
        rows.append(row)
        if row.get("label_source") != "human" and (
                (row["decision"] == "human" and row.get("reason") != "deferred")
                or (row["decision"] == "provisional" and row["audit"])):
            queue.append(row)
    return rows, queue


def counts(rows: list[dict]) -> dict:
    """The summary's counts of a labels folder's rows: ``auto`` and ``coverage`` count the model's labels only (an
    audit item a human answered is a human label), ``provisional``, ``human`` (every other row), the audit asked,
    the reasons."""
    n = max(len(rows), 1)
    auto = sum(r["decision"] == "auto" and r.get("label_source") != "human" for r in rows)
    provisional = sum(r["decision"] == "provisional" and r.get("label_source") != "human" for r in rows)
    return {"auto": auto, "provisional": provisional, "human": len(rows) - auto - provisional,
            "coverage": auto / n, "audit": sum(bool(r.get("audit")) for r in rows),
            "human_labelled": sum(r.get("label_source") == "human" for r in rows),
            "reasons": {k: sum(r.get("reason") == k for r in rows if r["decision"] == "human")
                        for k in sorted({r["reason"] for r in rows if r["decision"] == "human" and "reason" in r})}}


def _label(row: dict, h: Mapping | None) -> None:
    """The label a row carries: the humans' when there is one, else the model's while it is provisional or certified,
    else none yet."""
    if h is not None:
        row.update(outcome=h["outcome"], marker_s=h["marker_s"], failure_mode=None if h["outcome"] == "success"
                   else row.get("model_failure_mode"), human_outcome=h["outcome"], human_marker_s=h["marker_s"],
                   human_n=h["n"], label_source="human")
    elif row["decision"] in ("auto", "provisional"):
        row.update(outcome=row["model_outcome"], marker_s=row["model_marker_s"],
                   failure_mode=row["model_failure_mode"],
                   label_source="model" if row["decision"] == "auto" else "provisional")
    else:
        row.update(outcome=None, marker_s=None, failure_mode=None, label_source=None)


__all__ = ["VersionState", "chain_of", "chained", "check_chain", "counts", "derive_rows", "human_majority",
           "rules_of"]
