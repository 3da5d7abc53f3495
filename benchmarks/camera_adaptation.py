"""A camera no training suite had: how many labelled clips of it a small per-camera adaptation needs (the label curve).

    python -m benchmarks.camera_adaptation --root /work/bench56/quality-metaworld-one --heads base \
        --set unseen_camera --sizes 10,25,50 --draws 10

The heads ``benchmarks.head_ablations`` trained (``<root>/heads/<arm>-seed<k>.safetensors``, one per seed) rate the
new camera's clips (the held-out set ``--set``: MT10 from ``corner2``, which no training video shows) from the same
cache. For each size k and each of ``--draws`` random draws of whole scenarios holding k clips (the labels the
stratum's audit buys: the annotators' majority, or a reference's gold), three routes are fitted on those k clips, the
head frozen, and scored on the new camera's other scenarios against the simulator truth (BA at 0.5 and AUROC):

- ``threshold``: a logit offset (what a per-stratum threshold does; it cannot change the ranking);
- ``affine``: a per-channel scale and shift of the frozen encoder's maps (LIBERO-style, arXiv 2512.02902) and the
  offset, pulled towards the identity;
- nothing (``none``): the head as trained.

Writes ``<root>/camera-adaptation.json`` (each route's mean and range over draws and seeds, per k).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np


def set_inputs(model, suite, cache_dir: str):
    """(maps (n, k, c, h, w), share, since_s, text, truth (n,), labels (n,) NaN where unlabelled, scenario ids) of
    every clip of ``suite``: the cached frozen maps, the annotators' majority (or a reference's gold) as the labels an
    audit would buy, the simulator truth for scoring."""
    import torch

    from autorater.data.labels import label_table, majority_vote
    from autorater.data.suite import load_truth
    from autorater.models.parts.outcome import inputs_of, outcome_times
    from autorater.training.inputs.cache import FeatureCache

    ids = suite.continuation_ids()
    takeover = [suite.takeover_of(c) for c in ids]
    clips = FeatureCache(cache_dir).load(model, [str(suite.video_path(c)) for c in ids], takeovers_s=takeover)
    maps, index = inputs_of(clips.encoded)
    share, since = outcome_times(clips.times_s, torch.tensor(takeover, dtype=torch.float32), index.long())
    text = model.outcome.text([suite.instruction_of(c) for c in ids]).float()
    truth = {t["continuation_id"]: t["outcome"] == "success" for t in load_truth(suite.root)}
    votes = majority_vote(label_table(suite.annotations)) if suite.annotations else None
    gold = {r.continuation_id: r.outcome == "success" for r in suite.references}
    labels = [float(gold[c]) if c in gold else float(votes.at[c, "outcome"] == "success")
              if votes is not None and c in votes.index else float("nan") for c in ids]
    scenarios = [suite.get(c).scenario_id for c in ids]
    return (maps, share, since, text, np.array([truth[c] for c in ids], dtype=int), np.array(labels),
            np.array(scenarios))


class Adapter:
    """The route's few weights as a part of the one training loop (``training/loop.py``): a logit offset and, for
    ``affine``, a per-channel scale and shift of the frozen maps, pulled towards the identity; the head frozen."""

    def __init__(self, head, x, labels, route: str, pull: float):
        import torch

        self.head, self.x, self.labels, self.route, self.pull = head, x, labels, route, pull
        c = x[0].shape[2]
        self.module = torch.nn.ParameterDict({"offset": torch.nn.Parameter(torch.zeros(1)),
                                              "scale": torch.nn.Parameter(torch.zeros(c)),
                                              "shift": torch.nn.Parameter(torch.zeros(c))})

    def logits(self, rows):
        maps, share, since, text = (t[rows] for t in self.x)
        m = maps.float()
        if self.route == "affine":
            w = self.module
            m = m * (1 + w["scale"])[None, None, :, None, None] + w["shift"][None, None, :, None, None]
        return self.head(m, share, since, text) + self.module["offset"]

    def param_groups(self) -> list[dict]:
        names = ["offset"] + (["scale", "shift"] if self.route == "affine" else [])
        return [{"params": [self.module[n] for n in names]}]

    def loss(self, rows, rng):
        import torch

        from autorater.models.parts.outcome import outcome_loss

        y = torch.tensor(self.labels[rows], dtype=torch.float32)
        w = self.module
        pull = self.pull * (w["scale"].square().sum() + w["shift"].square().sum())
        return outcome_loss(self.logits(torch.as_tensor(rows)), y, torch.ones_like(y)) + pull, {}

    def epoch_metrics(self) -> dict:
        return {}

    def validate(self) -> dict:
        return {}  # no validation: the whole budget runs and the last weights stay


def fit_route(head, x, rows, labels, route: str, steps: int = 150, lr: float = 0.02, pull: float = 1e-3):
    """The adapter of ``route`` fitted on ``rows`` (the head frozen) by the product's loop, full batch, ``steps``
    steps of a constant ``lr`` (AdamW without decay: Adam): a function of rows -> logits."""
    import torch

    from autorater.training.loop import Schedule, fit

    adapter = Adapter(head, x, labels, route, pull)
    rows = np.asarray(rows)
    if route != "none":
        fit(adapter, rows, Schedule(epochs=steps, batch_size=len(rows), lr=lr, weight_decay=0.0, warmup_steps=0,
                                    cosine=False, patience=None, clip=None), rng=np.random.default_rng(0))
    return lambda r: adapter.logits(torch.as_tensor(r)).detach()


def draw_scenarios(scenarios: np.ndarray, labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of whole scenarios, drawn at random until they hold at least ``k`` labelled clips."""
    chosen = []
    for s in rng.permutation(np.unique(scenarios)):
        chosen += [i for i in np.flatnonzero(scenarios == s) if np.isfinite(labels[i])]
        if len(chosen) >= k:
            break
    return np.array(chosen[:max(k, 1)])


def main(argv: list[str] | None = None) -> int:
    import torch
    from safetensors.torch import load_file

    from autorater.calibration import auroc, outcome_metrics
    from autorater.data.suite import Suite
    from autorater.models import PRESETS, AutoModel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--heads", default="base", help="the head_ablations arm whose heads adapt")
    parser.add_argument("--set", default="unseen_camera")
    parser.add_argument("--sizes", default="10,25,50")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--pull", type=float, default=1e-3, help="the affine's pull towards the identity (L2)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(args.root)
    base = PRESETS["general-parts"]
    model = AutoModel.from_config(base.replace(outcome=dataclasses.replace(base.outcome, members=1),
                                               failure_modes=["timeout"]))
    maps, share, since, text, truth, labels, scenarios = set_inputs(model, Suite.load(root / "suites" / args.set),
                                                                    str(root / "cache"))
    x = (maps, share, since, text)
    paths = sorted((root / "heads").glob(f"{args.heads}-seed*.safetensors"))
    if not paths:
        raise SystemExit(f"no heads {args.heads}-seed*.safetensors under {root / 'heads'} (fix: run "
                         f"benchmarks.head_ablations --arms {args.heads} first)")
    results: dict = {}
    for path in paths:
        head = model.outcome.make_head()
        head.load_state_dict(load_file(str(path)))
        head.eval()
        for p in head.parameters():
            p.requires_grad_(False)
        for k in [int(v) for v in args.sizes.split(",")]:
            for d in range(args.draws):
                rng = np.random.default_rng(1000 * k + d)
                fit_rows = draw_scenarios(scenarios, labels, k, rng)
                rest = np.flatnonzero(~np.isin(scenarios, scenarios[fit_rows]))
                for route in ("none", "threshold", "affine"):
                    z = fit_route(head, x, fit_rows, labels, route, pull=args.pull)(rest).numpy()
                    m = {"balanced_accuracy": outcome_metrics(truth[rest], (z >= 0).astype(int))["balanced_accuracy"],
                         "auroc": auroc(truth[rest], z)}
                    results.setdefault(route, {}).setdefault(k, []).append(m)
            print(f"{path.stem} k={k}: " + ", ".join(
                f"{route} {np.mean([m['balanced_accuracy'] for m in results[route][k]]):.3f}/"
                f"{np.mean([m['auroc'] for m in results[route][k]]):.3f}" for route in results), flush=True)
    summary = {route: {k: {metric: {"mean": float(np.mean([m[metric] for m in ms])),
                                    "min": float(np.min([m[metric] for m in ms])),
                                    "max": float(np.max([m[metric] for m in ms]))}
                           for metric in ("balanced_accuracy", "auroc")} | {"n": len(ms)}
                       for k, ms in per_k.items()} for route, per_k in results.items()}
    out = root / f"camera-adaptation-{args.heads}-{args.set}.json"
    out.write_text(json.dumps({"heads": [p.name for p in paths], "set": args.set, "routes": summary}, indent=1) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """Whole scenarios drawn until they hold k labels; each route fitted on them, the head frozen (``none``: as is)."""
    import torch

    from autorater.models.parts.outcome import OutcomeHead

    scenarios, labels = np.repeat(np.arange(6), 2), np.array([1.0, 0.0] * 6)
    rows = draw_scenarios(scenarios, labels, 5, np.random.default_rng(0))
    assert len(rows) == 5 and len(set(scenarios[rows])) == 3
    head = OutcomeHead(channels=4, dim=8, queries=1, layers=1, heads=1, pooling="max").eval()
    for p in head.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(12, 4, 4, 2, 2, generator=g), torch.rand(12, 4), torch.rand(12, 4),
         torch.randn(12, head.text_dim, generator=g))
    plain = fit_route(head, x, rows, labels, "none")(np.arange(12))
    shifted = fit_route(head, x, rows, labels, "threshold", steps=20)(np.arange(12))
    assert torch.allclose((shifted - plain), (shifted - plain)[0].expand(12), atol=1e-5)  # one offset for all
    return fit_route(head, x, rows, labels, "affine", steps=5)(np.arange(12))
