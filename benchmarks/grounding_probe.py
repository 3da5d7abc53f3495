"""Can the instruction be grounded where the outcome is seen? A probe on the frozen frame features.

    python -m benchmarks.grounding_probe [--suites bench-out/quality-ego/suites] [--pixel-cells 4]
                                         [--image-size 128] [--num-frames 32] [--places 0]
                                         [--text bow|minilm] [--window 8] [--marker human|truth|MODEL_DIR]

On the successful training continuations (aggregated human label), the probe takes the ``window``
sampled frames ending one after the marker (the human one, the simulator's event time as a ceiling,
or a trained model's prediction), and a small model tells the clip's own instruction from another
scenario's instruction *of the same category* ("pick up the red ball" vs "pick up the green key"):
each frame becomes one position-aware embedding (its cells and their change, reduced per cell, one
linear read-out of the grid, or ``--places k``: k learned places, ``PlacePool``); learned words (or MiniLM
tokens) feed four slot queries, pooled into one query; the logit is the best frame's cosine, scaled. Split
by scenario; prints validation accuracy overall and per category (chance 0.5) and writes JSON. (A per-cell
dot product with a max over cells, the first design, did not even fit the training clips: position is the
signal.)

It answers the question the full model cannot: given *where* to look, are the features enough to
tell *what* happened? (README, "Model quality".) It needs the quality benchmark's suites.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from autorater.models import AutoModel


class Probe(nn.Module):
    """Own-vs-other instruction from a few frames: a position-aware frame embedding against the words.

    Each frame: its cells and their change, reduced per cell, then one linear read-out of the whole
    grid (position matters: in first-person video the target is in front of the agent); the words: a
    learned bag (or MiniLM tokens) pooled by slot queries. The logit is the best frame's dot product.
    """

    def __init__(self, channels: int, cells: int, text_encoder: nn.Module, text_dim: int, dim: int = 64,
                 slots: int = 4, per_cell: int = 16, places: int = 0, grid: tuple[int, int] | None = None):
        from autorater.model import PlacePool, SlotQueries

        super().__init__()
        self.text_encoder = text_encoder
        self.cell = nn.Sequential(nn.Conv2d(2 * channels, dim, 1), nn.GELU(), nn.Conv2d(dim, per_cell, 1))
        self.frame = nn.Sequential(nn.Flatten(1), nn.Linear(per_cell * cells, dim), nn.LayerNorm(dim)) \
            if not places else PlacePool(per_cell, grid, places, dim)
        self.slots = SlotQueries(text_dim, slots)
        self.query = nn.Sequential(nn.Linear(slots * text_dim, dim), nn.LayerNorm(dim))
        self.scale = nn.Parameter(torch.tensor(math.log(10.0)))
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, instructions: list[str]) -> torch.Tensor:
        # x (b, k, c, h, w) -> (b,) logit "this is the clip's own instruction"
        change = torch.cat([torch.zeros_like(x[:, :1]), x[:, 1:] - x[:, :-1]], dim=1)
        x = torch.cat([x, change], dim=2)
        b, k = x.shape[:2]
        v = self.frame(self.cell(F.group_norm(x.flatten(0, 1), 1))).view(b, k, -1)  # (b, k, d)
        tokens, mask = self.text_encoder(instructions)
        q = self.query(self.slots(tokens, mask).flatten(1))  # (b, d)
        sim = torch.einsum("bkd,bd->bk", F.normalize(v, dim=-1), F.normalize(q, dim=-1))
        return self.scale.exp() * sim.amax(1) + self.bias


def windows(features: torch.Tensor, marker_index: np.ndarray, size: int) -> torch.Tensor:
    """The ``size`` frames ending one after each marker frame (clamped to the clip): (n, size, c, h, w)."""
    t = features.shape[1]
    end = np.minimum(marker_index + 1, t - 1)
    idx = np.clip(end[:, None] - np.arange(size)[::-1][None], 0, t - 1)
    return features[torch.arange(len(idx))[:, None], torch.from_numpy(idx)]


def negatives(instructions: list[str], categories: list[str], rng: np.random.Generator) -> list[str]:
    """For each row, another row's instruction of the same category (a different text)."""
    by_cat: dict[str, list[str]] = {}
    for text, cat in zip(instructions, categories):
        by_cat.setdefault(cat, []).append(text)
    out = []
    for text, cat in zip(instructions, categories):
        pool = [o for o in by_cat[cat] if o != text]
        out.append(pool[rng.integers(len(pool))] if pool else text)
    return out


def main(argv: list[str] | None = None) -> int:
    from autorater.data.splits import split_groups
    from autorater.data.suite import Suite
    from autorater.encoders import BagOfWords, tokenize_words
    from autorater.models import PRESETS
    from autorater.training.cache import FeatureCache
    from autorater.training.dataset import build_examples, marker_indices

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="bench-out/quality-ego/suites", help="the quality benchmark's suites")
    parser.add_argument("--cache-dir", default=None, help="feature cache (default: next to the suites)")
    parser.add_argument("--pixel-cells", type=int, default=4, help="raw colours per cell beside lite0 (0: none)")
    parser.add_argument("--image-size", type=int, default=128,
                        help="decoded frame size (112: the 7x7 first-person tiles fall on the 16-px cells)")
    parser.add_argument("--num-frames", type=int, default=32, help="frames sampled per clip (64: every frame)")
    parser.add_argument("--text", choices=("bow", "minilm"), default="bow")
    parser.add_argument("--window", type=int, default=8, help="frames ending one after the marker")
    parser.add_argument("--marker", default="human",
                        help="'human' (the aggregated annotators' marker), 'truth' (the simulator's event time: "
                             "a ceiling, never a training label) or a model folder whose predicted marker is used")
    parser.add_argument("--places", type=int, default=0,
                        help="frame read-out: 0 = one linear map of the whole grid; k = k learned places (PlacePool)")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="JSON report (default: next to the suites)")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    root = Path(args.suites)
    if not (root / "train" / "suite.json").exists():
        raise SystemExit(f"{root / 'train'} is not a suite: run the quality benchmark first "
                         f"(python -m benchmarks.quality --view ego) or pass --suites")

    suite = Suite.load(root / "train")
    ex = build_examples([suite])
    cfg = PRESETS["babyai-grid"].replace(pixel_cells=args.pixel_cells, image_size=args.image_size,
                                         num_frames=args.num_frames)
    encoder_model = AutoModel.from_config(cfg)
    clips = FeatureCache(args.cache_dir or root.parent / "cache").load(encoder_model, ex.video_paths, progress=True)
    marker_s = np.array(ex.marker_s, dtype=float)
    if args.marker == "truth":  # the simulator's event time: the ceiling, given exactly where to look
        truth = {}
        with open(root / "train" / "simulator_truth.jsonl") as f:
            for line in f:
                row = json.loads(line)
                truth[row["continuation_id"]] = row["marker_s"] if row["outcome"] == "success" else np.nan
        marker_s = np.array([truth.get(c, np.nan) for c in ex.continuation_ids], dtype=float)
    elif args.marker != "human":  # where a trained model says the outcome is seen
        from autorater.training.baselines import predict_cached

        model = AutoModel.from_pretrained(args.marker)
        predicted = {r["continuation_id"]: r.get("marker_s", np.nan) for r in
                     predict_cached(model, suite, str(args.cache_dir or root.parent / "cache"))}
        marker_s = np.array([predicted.get(c, np.nan) for c in ex.continuation_ids], dtype=float)
    index = marker_indices(marker_s, clips.times_s.numpy(), clips.durations_s.numpy())
    t = clips.features.shape[1]
    keep = [i for i in range(len(ex)) if ex.p_success[i] > 0.5 and np.isfinite(marker_s[i]) and 0 <= index[i] < t
            and i not in clips.errors]
    x = windows(clips.features[keep].float(), index[keep], args.window)
    instr = [ex.instructions[i] for i in keep]
    cats = [ex.categories[i] for i in keep]
    train_rows, val_rows = split_groups([ex.scenario_keys[i] for i in keep], 0.2, args.seed)

    if args.text == "bow":
        vocab = sorted({w for s in instr for w in tokenize_words(s)})
        text, text_dim = BagOfWords(vocab, 64, 24), 64
    else:
        text = encoder_model.text_encoder
        text_dim = text.out_dim
    probe = Probe(x.shape[2], x.shape[-2] * x.shape[-1], text, text_dim, places=args.places, grid=tuple(x.shape[-2:]))
    params = [p for p in probe.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    val_neg = negatives(instr, cats, np.random.default_rng(args.seed + 1))  # fixed validation negatives

    def accuracy(rows) -> tuple[float, dict]:
        probe.eval()
        with torch.no_grad():
            own = torch.cat([probe(x[rows[s:s + 128]], [instr[r] for r in rows[s:s + 128]])
                             for s in range(0, len(rows), 128)])
            other = torch.cat([probe(x[rows[s:s + 128]], [val_neg[r] for r in rows[s:s + 128]])
                               for s in range(0, len(rows), 128)])
        right = torch.cat([own > 0, other <= 0]).numpy()
        both = np.array([cats[r] for r in rows] * 2)
        return float(right.mean()), {str(c): round(float(right[both == c].mean()), 3) for c in sorted(set(both))}

    history, start = [], time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        probe.train()
        order = rng.permutation(train_rows)
        neg = negatives(instr, cats, rng)
        for s in range(0, len(order), 32):
            rows = order[s:s + 32]
            logits = probe(torch.cat([x[rows], x[rows]]), [instr[r] for r in rows] + [neg[r] for r in rows])
            target = torch.cat([torch.ones(len(rows)), torch.zeros(len(rows))])
            loss = F.binary_cross_entropy_with_logits(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        train_acc, _ = accuracy(train_rows)
        val_acc, per_cat = accuracy(val_rows)
        history.append({"epoch": epoch, "train_accuracy": round(train_acc, 3), "val_accuracy": round(val_acc, 3),
                        "val_by_category": per_cat})
        print(f"epoch {epoch:>2}: train {train_acc:.3f}  validation {val_acc:.3f}  {per_cat}", flush=True)
    best = max(history, key=lambda h: h["val_accuracy"])
    report = {"args": vars(args), "clips": len(keep), "train": len(train_rows), "val": len(val_rows),
              "wall_s": round(time.perf_counter() - start, 1), "best": best, "final": history[-1],
              "history": history}
    out = Path(args.out or root.parent / f"grounding-probe-{args.text}-pix{args.pixel_cells}-{args.image_size}px-"
                                          f"{args.num_frames}f-w{args.window}-places{args.places}-"
                                          f"{args.marker if args.marker in ('human', 'truth') else 'model'}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nown vs same-category instruction, {len(keep)} successful clips ({len(val_rows)} validation): best "
          f"validation accuracy {best['val_accuracy']:.3f} (epoch {best['epoch']}), final "
          f"{history[-1]['val_accuracy']:.3f}; chance 0.5\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
