"""A labels folder's files written by hand, and a snapshot of a folder's files, for the hardening tests of issue 58
(tests/test_hardening_folders.py, tests/test_fuzz_folders.py). Not a test module (no ``test_`` prefix)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from autorater.data.suite import Suite


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (symlinks not followed, the lock left out): what a test compares."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != ".lock" and root in p.resolve().parents}


def hand_labels(suite_dir: Path) -> tuple[dict, list[dict], dict]:
    """``job.json``, ``labels.jsonl``'s rows and ``summary.json`` of a finished labelling job of the suite at
    ``suite_dir`` as ``autorater label`` writes them, by hand: every continuation routed to humans."""
    suite = Suite.load(suite_dir)
    ids = suite.continuation_ids()
    job = {"suite": str(suite_dir), "suite_name": "tiny", "suite_version": "v1", "continuations": len(ids),
           "ids_sha1": hashlib.sha1("\n".join(ids).encode()).hexdigest(), "model": "m", "model_name": "hand@1",
           "weights_sha1": None, "calibration_sha1": None, "batch_size": 16, "audit_share": 0.3, "seed": 0,
           "on_drift": "warn", "audit_hash": "blake2b", "certify": "audit", "strata": ["category"]}
    rows = [{"continuation_id": cid, "p_success": 0.9, "outcome": None, "marker_s": None, "failure_mode": None,
             "model": "hand@1", "decision": "human", "audit": False, "reason": "uncertain",
             "stratum": "category=goto", "model_outcome": "success", "model_marker_s": 0.5,
             "model_failure_mode": None, "logit": 2.2, "marker_spread_s": 0.1, "duration_s": 1.0} for cid in ids]
    summary = {"suite": "tiny@v1", "model": "hand@1", "continuations": len(ids), "auto": 0, "provisional": 0,
               "human": len(ids), "coverage": 0.0, "audit": 0, "reasons": {"uncertain": len(ids)}, "errors": 0,
               "human_tasks": len(ids), "routed_by": None}
    return job, rows, summary
