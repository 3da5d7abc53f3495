"""Model quality on held-out data, beside the baselines and the human annotators, in one run, per world.

    python -m benchmarks.quality [--world babyai|metaworld] [--cameras one|drawn|both] [--quick] [--out DIR]
    python -m benchmarks.quality --world metaworld --set outcome.blocks=0 --autorater-only   # a recipe variant
    python -m benchmarks.quality --world metaworld --cameras drawn --train-scenarios 200     # a learning curve point
    python -m benchmarks.quality --config general                                            # another preset
    python -m benchmarks.quality --world metaworld --cameras one --train-mix recommended     # MT10 and relatives

Held-out sets, all scored against the simulator truth (the training suite's scenarios never appear; the
calibration is fitted on the training suite's reference scenarios, which training never sees either):

BabyAI (``--world babyai``, the agent's first-person view):
- unseen scenarios: new seeds, the training levels and agents; and a second draw of them
  (``unseen_scenarios_2``, generator seed 106), so that the target is also read on both draws pooled;
- unseen agents: the ``ditherer`` and ``quitter`` behaviours, never seen in training;
- unseen instruction families: levels kept out of training;
- instruction swaps: the unseen-scenario videos with altered instructions, truth recomputed by replay.

Meta-World (``--world metaworld``), 224 px, trained on the MT10 tasks with ten agents whose names do not give the
outcome away, beside the training suite's simulator-judged swaps of shared scenes; two camera regimes
(``benchmarks/quality_suites.py``), each in its own folder (``bench-out/quality-metaworld-one``,
``bench-out/quality-metaworld``):
- unseen scenarios (MT10, new seeds, two draws), unseen agents (``sluggish``, ``stop-short``), unseen tasks (ten
  tasks outside MT10), the unseen camera (``corner2``), and the held-out swaps (shared scenes, 40% successes) with
  swap pairs (a success under its own words, a failure under the swap: a rater blind to the words scores 0).

Methods: the world's default recipe (what ``autorater train`` picks without ``--config``: BabyAI's grid reader
``babyai-grid``, Meta-World's general model; ``--config`` another), on BabyAI the general model beside it (the first
seed), the instruction-blind model, a last-frame-only model, the bar-code CNN and the majority class, all trained on
the same suite. Every score is balanced accuracy at 0.5 beside the AUROC of the model's score (how well it ranks a
held-out set's outcomes before an audit sets its threshold). Meta-World's unseen tasks are also scored split by
whether a task of their family is in training (``unseen_tasks_by_relatives``; ``--train-mix recommended`` trains on
MT10 and the relatives of the held-out tasks, ``tasks.RECOMMENDED_MIX``). Also: training wall time, peak memory, and
end-to-end prediction throughput next to decode-only throughput. Prints a table, writes ``quality.json`` and logs the
comparison to MLflow.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import resource
import time
from pathlib import Path

from benchmarks.quality_scores import (
    by_relatives,
    pooled_failure_modes,
    pooled_outcome,
    reference_calibration,
    selective_on,
    swap_pairs,
)
from benchmarks.quality_suites import first_scenarios, generate

# --cameras: the plan of each Meta-World camera regime
REGIMES = {"one": "metaworld-one", "drawn": "metaworld", "views": "metaworld-views"}
# The training scenarios a plan trains on by default (the learning curve's choice within the 30-minute budget); the
# drawn-camera suite holds 800 for the curve's largest point (--train-scenarios 800)
TRAIN_SCENARIOS = {"metaworld": 400}  # (metaworld-views: its 200 scenarios, each rollout seen twice)


def _throughput(model, suite, limit: int) -> dict:
    from autorater.data.video import read_video
    from autorater.rater import Rater

    ids = suite.continuation_ids()[:limit]
    start = time.perf_counter()
    for cid in ids:
        read_video(suite.video_path(cid), **model.processor.decode_args(suite.takeover_of(cid)))
    decode = len(ids) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in Rater(model).rate_suite(suite, ids=ids):
        pass
    end_to_end = len(ids) / (time.perf_counter() - start)
    return {"videos": len(ids), "decode_videos_per_s": round(decode, 2), "predict_videos_per_s": round(end_to_end, 2)}


def _parser():
    from autorater.models import DEFAULT_PRESET, PRESETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", choices=("babyai", "metaworld"), default="babyai")
    parser.add_argument("--cameras", choices=("one", "drawn", "views", "both"), default="both",
                        help="Meta-World: the camera regime(s) to run (one camera; a camera drawn per scenario; views: "
                             "drawn cameras, two views of every training rollout; both: one and drawn)")
    parser.add_argument("--config", default=None, choices=sorted(PRESETS),
                        help=f"the preset to score (default: the world's, what `autorater train` picks without "
                             f"--config: BabyAI babyai-grid, Meta-World {DEFAULT_PRESET!r}); the other of the two "
                             f"trains beside it on the first seed")
    parser.add_argument("--train-mix", choices=("mt10", "recommended"), default="mt10",
                        help="Meta-World: train on MT10 (the default) or on the recommended mix for new tasks (MT10 "
                             "and the suite of its relatives, tasks.RECOMMENDED_MIX; the held-out tasks kept out)")
    parser.add_argument("--quick", action="store_true", help="tiny suites and few epochs: checks the pipeline only")
    parser.add_argument("--out", default=None, help="output folder (default bench-out/quality-<world>[-one])")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--view", choices=("full", "ego"), default="ego",
                        help="BabyAI's rendering: the agent's own first-person 7x7 view (as STS videos are "
                             "first-person; the default) or the whole grid from above")
    parser.add_argument("--image-size", type=int, default=None,
                        help="frame size of the generated suites (default: BabyAI 112, Meta-World 224)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change one field of the preset's config (JSON value, repeatable), "
                             "e.g. --set outcome.blocks=0 (a part's field; the flat outcome_blocks works too)")
    parser.add_argument("--train-set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change one TrainConfig field (JSON value, repeatable; a stage's as STAGE.FIELD), e.g. "
                             "--train-set outcome.swap_weight=1")
    parser.add_argument("--train-scenarios", type=int, default=None,
                        help="train on the first N scenarios of the training suite (and their swaps): a point of "
                             "the learning curve")
    parser.add_argument("--without-swaps", action="store_true",
                        help="train on the training suite alone, not beside its judged swaps")
    parser.add_argument("--autorater-only", action="store_true",
                        help="train and score the autorater only (a recipe variant; the baselines do not change)")
    parser.add_argument("--model", metavar="DIR",
                        help="score this saved model (a model folder this benchmark wrote) instead of training one, "
                             "beside freshly trained baselines: re-scores it on held-out sets added since")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads (2: this machine's cores; 1 to run two variants side by side)")
    parser.add_argument("--seeds", default="0,1,2",
                        help="training seeds: one model each, every held-out score reported per seed and as mean and "
                             "range (default 0,1,2; --quick and --model: the first only)")
    return parser


def main(argv: list[str] | None = None) -> int:
    import torch

    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.world == "babyai":
        return run_plan(args, "babyai", Path(args.out or "bench-out/quality-babyai"))
    regimes = ["one", "drawn"] if args.cameras == "both" else [args.cameras]
    for regime in regimes:
        plan = REGIMES[regime]
        out = Path(args.out) / plan if args.out and len(regimes) > 1 else Path(args.out or f"bench-out/quality-{plan}")
        run_plan(args, plan, out)
    return 0


def _plan_suites(args, plan: str, out: Path):
    """The plan's suites (generated when missing): the held-out sets by name, the training suite (its first
    ``--train-scenarios``), the suites training reads (its judged swaps unless ``--without-swaps``, the relatives with
    ``--train-mix recommended``) and the number of training scenarios."""
    from autorater.data.suite import Suite

    image_size = args.image_size or {"babyai": None}.get(plan, 224)
    paths = generate(out / "suites", args.quick, plan, args.view, image_size)
    suites = {k: Suite.load(v) for k, v in paths.items()}
    train_scenarios = args.train_scenarios or TRAIN_SCENARIOS.get(plan)
    train_suite = first_scenarios(suites.pop("train"), train_scenarios)
    swaps = suites.pop("train_swaps", None)
    relatives = suites.pop("train_relatives", None)  # the recommended mix's tasks outside MT10 (--train-mix)
    kept = {s.scenario_id for s in train_suite.scenarios}
    train_suites = [train_suite] + ([first_scenarios(swaps, None, kept)] if swaps and not args.without_swaps else [])
    if args.train_mix == "recommended":
        if relatives is None:
            raise SystemExit(f"--train-mix recommended: the {plan} plan has no train_relatives suite (Meta-World only)")
        train_suites.append(relatives)
    return suites, train_suite, train_suites, train_scenarios


def _variant(args, train_scenarios) -> list[str]:
    """What this run changes of the default recipe and data (empty: the default), as ``FIELD=VALUE`` words."""
    return (args.set + args.train_set + ([f"train_scenarios={train_scenarios}"] if args.train_scenarios else [])
            + (["without_swaps"] if args.without_swaps else []) + ([f"epochs={args.epochs}"] if args.epochs else [])
            + ([f"train_mix={args.train_mix}"] if args.train_mix != "mt10" else []))


def run_plan(args, plan: str, out: Path) -> int:
    """Train (or re-score) the autorater on one plan's training suite, score it and the baselines on its held-out
    sets, write ``quality*.json`` under ``out``."""
    from autorater.data.worlds import preset_for
    from autorater.mlflow_registry import default_tracking_uri
    from autorater.models import DEFAULT_PRESET, PRESETS
    from autorater.training import baselines as B
    from autorater.training.recipe import TrainConfig, recipe_for
    from autorater.training.tracking import track_training

    train_changes = nested(parse_overrides(args.train_set, TrainConfig, "--train-set"))
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if args.quick or args.model:
        seeds = seeds[:1]
    out.mkdir(parents=True, exist_ok=True)
    suites, train_suite, train_suites, train_scenarios = _plan_suites(args, plan, out)
    world_default, why = preset_for([s.info.source for s in train_suites], DEFAULT_PRESET)  # as `autorater train`
    preset = args.config or world_default
    print(f"preset {preset} ({'--config' if args.config else why})", flush=True)
    base = PRESETS[preset]
    config = base.replace(**parse_overrides(args.set, type(base), "--set"))
    short = {"epochs": 3, "stream": {"match_warmup_epochs": 2}} if args.quick else {}
    tc = recipe_for(config, cache_dir=str(out / "cache"), **short).replace(
        **({"epochs": args.epochs} if args.epochs else {})).replace(**train_changes)
    uri = default_tracking_uri(out / "runs")

    variant = _variant(args, train_scenarios)
    run_name = "default-recipe" if not variant else "variant " + " ".join(variant)
    slug = "" if not variant else "-" + variant_slug(variant)
    result = {"world": plan, "preset": preset, "preset_chosen_by": "--config" if args.config else why,
              "config": config.to_dict(), "train_config": tc.to_dict(),
              "overrides": variant, "seeds": seeds,
              "train": {"continuations": sum(len(s.continuations) for s in train_suites),
                        "suites": [s.info.version for s in train_suites]}, "held_out": {}, "per_seed": {}}
    baselines = None
    if not args.autorater_only:
        baselines = {"instruction_blind": B.train_instruction_blind(train_suites, config, tc),
                     "last_frame": B.train_last_frame(train_suites, config, tc),
                     "barcode": B.train_barcode(train_suites, config, tc, epochs=5 if args.quick else 30),
                     "majority": B.train_majority(train_suites, tc)}
    for seed in seeds:
        seed_tc = dataclasses.replace(tc, seed=seed)
        seed_slug = slug + (f"-seed{seed}" if len(seeds) > 1 or seed else "")
        if args.model:
            model, run_id = _reuse(args.model, result, variant)
            config, seed_tc = model.config, TrainConfig.from_dict({**result["train_config"], "cache_dir": tc.cache_dir})
            result["config"], seed_slug = config.to_dict(), "-rescored-" + variant_slug([Path(args.model).name])
            train_record = dict(result["train"])
        else:
            start = time.perf_counter()
            trained, run_id, _ = track_training(uri, "autorater-quality", f"{run_name} seed {seed}", config, seed_tc,
                                                train_suites, out=out / f"model{seed_slug}", progress=True)
            train_record = {"wall_s": round(time.perf_counter() - start, 1), "best": trained.best,
                            "history": trained.history, "verdict": trained.verdict,
                            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
            model = trained.model
            print(f"seed {seed} trained in {train_record['wall_s']:.0f} s: {trained.verdict}", flush=True)
        beside = None  # the world's default and the general model, side by side: the other one (first seed)
        other = next((p for p in (world_default, DEFAULT_PRESET) if p != preset), None)
        if other is not None and not args.autorater_only and seed == seeds[0]:
            trained_beside = track_training(uri, "autorater-quality", other, PRESETS[other], seed_tc, train_suites,
                                            out=out / f"model-{other}", progress=True)[0]
            beside = (method_name(other), trained_beside.model)
        scored = _score_seed(model, beside, train_suite, suites, seed_tc, baselines if seed == seeds[0] else None,
                             uri, run_id, out / "predictions" / (seed_slug.strip("-") or "default"), train_suites)
        scored["train"] = train_record
        result["per_seed"][seed] = _seed_summary(scored)
        if seed == seeds[0]:  # the full reports, baselines and annotators beside the model, of the first seed
            result.update({k: v for k, v in scored.items() if k != "train"})
            result["train"].update(train_record)
        print(f"seed {seed}: " + ", ".join(f"{k} {v['balanced_accuracy']:.3f}"
                                          for k, v in result["per_seed"][seed]["held_out"].items()), flush=True)
    result["across_seeds"] = across_seeds(result["per_seed"])
    result["throughput"] = _throughput(model, suites["unseen_scenarios"], 40 if args.quick else 200)
    report_name = f"quality{slug}.json"
    (out / report_name).write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(_summary(result))
    print(f"\nwritten to {out / report_name}; MLflow: {uri}")
    return 0


def _score_seed(model, beside, train_suite, suites: dict, tc, baselines: dict | None, uri: str, run_id: str | None,
                predictions: Path, train_suites: list | None = None) -> dict:
    """One trained model on every held-out set (beside the baselines and ``beside``, a (method name, model) of the
    other preset, when given): the reports, the reference-fitted calibration and its selective policy on each set,
    pooled scores, the unseen tasks with and without a relative in ``train_suites``; every prediction row written
    under ``predictions`` (``<set>.jsonl``) so that two runs can be compared paired by scenario."""
    from autorater.data.suite import write_jsonl
    from autorater.training import baselines as B
    from autorater.training.evaluate import evaluate, format_report
    from autorater.training.tracking import log_evaluation

    calibration = reference_calibration(model, train_suite, tc.cache_dir)
    result = {"calibration": calibration, "held_out": {}, "selective": {}}
    scored, scored_beside, blind = {}, {}, {}
    predictions.mkdir(parents=True, exist_ok=True)
    for name, suite in suites.items():
        methods = {"autorater": B.predict_cached(model, suite, tc.cache_dir),
                   "autorater_calibrated": B.predict_cached(model, suite, tc.cache_dir, name="autorater_calibrated",
                                                            calibration=calibration)}
        write_jsonl(predictions / f"{name}.jsonl", methods["autorater"])
        if beside is not None:
            methods[beside[0]] = B.predict_cached(beside[1], suite, tc.cache_dir, name=beside[0])
        if baselines is not None:
            methods.update({
                "instruction_blind": B.predict_cached(baselines["instruction_blind"], suite, tc.cache_dir,
                                                      name="instruction_blind"),
                "last_frame": [dict(r, marker_s=float("nan")) if "error" not in r else r for r in
                               B.predict_cached(baselines["last_frame"], suite, tc.cache_dir, last_frame_only=True,
                                                name="last_frame")],
                "barcode": B.predict_barcode(baselines["barcode"], suite, tc.cache_dir),
                "majority": B.predict_majority(baselines["majority"], suite)})
        report = evaluate(suite, methods, gold="truth", include_humans=bool(suite.annotations))
        result["held_out"][name] = report
        result["selective"][name] = selective_on(methods["autorater"], suite, calibration)
        print(format_report(report) + "\n", flush=True)
        if run_id is not None:
            log_evaluation(uri, run_id, report, prefix=f"quality.{name}")
        scored[name] = methods["autorater"]
        if "instruction_blind" in methods:
            blind[name] = methods["instruction_blind"]
        if beside is not None:
            scored_beside[name] = methods[beside[0]]
    if "instruction_swaps" in suites and "unseen_scenarios" in suites:
        raters = {"autorater": scored, **({"instruction_blind": blind} if blind else {})}
        result["swap_pairs"] = {name: swap_pairs(rows["unseen_scenarios"], rows["instruction_swaps"],
                                                 suites["unseen_scenarios"], suites["instruction_swaps"])
                                for name, rows in raters.items()}
        print("swap pairs (a success under its own instruction, a failure under the swap; both answers right): "
              + ", ".join(f"{k} {v['both_right'] or 0:.3f} of {v['n']}" for k, v in result["swap_pairs"].items()),
              flush=True)
    _smaller_ensembles(model, suites, tc.cache_dir, predictions)
    draws = [n for n in ("unseen_scenarios", "unseen_scenarios_2") if n in scored]
    result["unseen_scenarios_pooled"] = pooled_outcome([(scored[n], suites[n]) for n in draws])
    result["unseen_scenarios_failure_modes"] = pooled_failure_modes([(scored[n], suites[n]) for n in draws])
    if scored_beside:
        result[f"unseen_scenarios_failure_modes_{beside[0]}"] = pooled_failure_modes(
            [(scored_beside[n], suites[n]) for n in draws])
    tasks = [n for n in ("unseen_tasks", "unseen_tasks_norel") if n in scored]
    if tasks and train_suites:
        result["unseen_tasks_by_relatives"] = by_relatives([(scored[n], suites[n]) for n in tasks], train_suites)
        if run_id is not None:
            log_evaluation(uri, run_id, result["unseen_tasks_by_relatives"], prefix="quality.unseen_tasks_by_relatives")
    return result


def method_name(preset: str) -> str:
    """A preset's column in the reports: ``babyai-grid`` -> ``babyai_grid``."""
    return preset.replace("-", "_")


def _smaller_ensembles(model, suites: dict, cache_dir: str, predictions: Path) -> None:
    """A model of several outcome heads: the predictions of its first head alone and of its first three (the same
    gate) on every held-out set, in ``<predictions>-heads<k>/``, and of all its heads with the gate at 0
    (``-nogate``), so that ``benchmarks.paired`` compares them with the whole on the same videos (no training)."""
    import torch

    from autorater.data.suite import write_jsonl
    from autorater.models import GeneralModel
    from autorater.training import baselines as B

    members = model.config.outcome.members if isinstance(model, GeneralModel) and model.config.outcome.frames else 1
    smaller = {f"heads{k}": k for k in (1, 3) if k < members}
    if members > 1 and float(model.gate.detach()):
        smaller["nogate"] = members  # the same heads, the gate at 0: what the stream's correction adds
    for tag, k in smaller.items():
        small, folder = first_outcome_heads(model, k), predictions.with_name(f"{predictions.name}-{tag}")
        if tag == "nogate":
            with torch.no_grad():
                small.gate.zero_()
        folder.mkdir(parents=True, exist_ok=True)
        for name, suite in suites.items():
            write_jsonl(folder / f"{name}.jsonl", B.predict_cached(small, suite, cache_dir))


def first_outcome_heads(model, k: int):
    """A copy of a general ``model`` with its first ``k`` outcome heads only (the same gate): a smaller ensemble, or
    one head, to compare with the whole on the same videos."""
    import copy
    import dataclasses

    from autorater.models import AutoModel

    config = model.config.replace(outcome=dataclasses.replace(model.config.outcome, members=k))
    small = AutoModel.from_config(config)
    small.load_state_dict({n: v for n, v in model.state_dict().items() if not n.startswith("outcome.heads.")},
                          strict=False)
    small.outcome.set_heads([copy.deepcopy(head) for head in model.outcome.heads[:k]])
    return small.to(model.device).eval()


def _seed_summary(scored: dict) -> dict:
    """The numbers one seed is judged on: BA per held-out set (accuracy for the swaps), the marker, coverage."""
    held = {}
    for name, report in scored["held_out"].items():
        m = report["methods"]["autorater"]
        held[name] = {"balanced_accuracy": m["outcome"]["balanced_accuracy"], "accuracy": m["outcome"]["accuracy"],
                      "auroc": m["outcome"].get("auroc")}
    marker = scored["held_out"].get("unseen_scenarios", {}).get("methods", {}).get("autorater", {}).get("marker", {})
    pooled = scored.get("unseen_scenarios_pooled") or {}
    relatives = scored.get("unseen_tasks_by_relatives") or {}
    return {"held_out": held, "unseen_scenarios_pooled": pooled.get("balanced_accuracy"),
            "unseen_scenarios_pooled_auroc": pooled.get("auroc"),
            "unseen_tasks_by_relatives": {k: {m: relatives[k][m] for m in ("balanced_accuracy", "auroc", "n")}
                                          for k in ("with_relatives", "without_relatives") if k in relatives},
            "marker_median_abs_error_s": marker.get("median_abs_error_s"),
            "swap_pairs_both_right": scored.get("swap_pairs", {}).get("autorater", {}).get("both_right"),
            "coverage": {n: s["coverage"] for n, s in scored["selective"].items()},
            "agreement": {n: s["agreement"] for n, s in scored["selective"].items()},
            "train": {k: scored["train"].get(k) for k in ("wall_s", "peak_rss_gib", "verdict")}}


def across_seeds(per_seed: dict) -> dict:
    """Mean and range over seeds of each held-out balanced accuracy (accuracy for the swaps) and AUROC
    (``auroc:<set>``), the pooled unseen scenarios, the unseen tasks with and without relatives, the marker and the
    unseen-scenario coverage."""
    import numpy as np

    def stats(values):
        values = [v for v in values if v is not None]
        return None if not values else {"mean": float(np.mean(values)), "min": float(min(values)),
                                        "max": float(max(values)), "values": values}

    runs = list(per_seed.values())
    names = sorted({n for r in runs for n in r["held_out"]})
    key = {"instruction_swaps": "accuracy"}
    out = {n: stats([r["held_out"][n][key.get(n, "balanced_accuracy")] for r in runs if n in r["held_out"]])
           for n in names}
    out.update({f"auroc:{n}": stats([r["held_out"][n].get("auroc") for r in runs if n in r["held_out"]])
                for n in names})
    out["unseen_scenarios_pooled"] = stats([r["unseen_scenarios_pooled"] for r in runs])
    out["auroc:unseen_scenarios_pooled"] = stats([r.get("unseen_scenarios_pooled_auroc") for r in runs])
    for group in ("with_relatives", "without_relatives"):
        for metric in ("balanced_accuracy", "auroc"):
            out[f"unseen_tasks_{group}:{metric}"] = stats(
                [r.get("unseen_tasks_by_relatives", {}).get(group, {}).get(metric) for r in runs])
    out["swap_pairs_both_right"] = stats([r.get("swap_pairs_both_right") for r in runs])
    out["marker_median_abs_error_s"] = stats([r["marker_median_abs_error_s"] for r in runs])
    out["coverage_unseen_scenarios"] = stats([r["coverage"].get("unseen_scenarios") for r in runs])
    out["train_wall_s"] = stats([r["train"]["wall_s"] for r in runs])
    return out


def _reuse(folder: str, result: dict, variant: list[str]):
    """``--model``: the saved model, its training record (recipe, wall time, best epoch) and its MLflow run."""
    from autorater.rater import Rater

    if variant:
        raise SystemExit("--model scores a saved model as it is: leave --set/--train-set out (its recipe is in its "
                         "metadata.json)")
    from autorater.rater import read_metadata

    meta = read_metadata(folder)
    if "train_config" not in meta:
        raise SystemExit(f"--model {folder}: no training record in its metadata.json (no metadata.json, or one "
                         f"without train_config); pass a model folder this benchmark wrote "
                         f"(e.g. bench-out/quality/model-seed_0)")
    result["train_config"] = meta["train_config"]
    result["train"].update(reused=str(folder), wall_s=meta.get("wall_s"), best=meta.get("best"), peak_rss_gib=None)
    return Rater.load(folder, calibrated=False).model, meta.get("mlflow_run_id")


def variant_slug(variant: list[str], limit: int = 120) -> str:
    """A folder-safe name for a variant; a long one is cut and keeps a hash of the whole, so two variants
    that share a long prefix (a second stage ``init_from`` the first) never write into one folder."""
    import hashlib

    slug = re.sub(r"[^A-Za-z0-9_.]+", "_", "-".join(variant)).strip("_.")
    if len(slug) <= limit:
        return slug
    return slug[:limit - 9] + "-" + hashlib.sha1(slug.encode()).hexdigest()[:8]


def parse_overrides(items: list[str], cls, flag: str = "--set") -> dict:
    """``["image_size=112", "text_encoder=bow"]`` -> ``{"image_size": 112, "text_encoder": "bow"}``, checked
    against the dataclass ``cls`` (``AutoraterConfig`` or ``TrainConfig``). A value that is not JSON is a string."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} {item!r}: expected FIELD=VALUE, e.g. {flag} epochs=20")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    defaults = cls()
    parts = cls.parts() if hasattr(cls, "parts") else cls.stages()  # a model config's parts, a recipe's stages
    fields = set(defaults.to_dict()) - set(parts) - {"architecture"}
    known = sorted(fields) + [f"{p}.{f.name}" for p, part in parts.items() for f in dataclasses.fields(part)]
    for key, value in out.items():
        at = _part_key(cls, key, parts)
        if at is None and key not in fields:
            raise SystemExit(f"{flag} {key}: not a {cls.__name__} field; known: {', '.join(known)}")
        default = getattr(getattr(defaults, at[0]), at[1]) if at else getattr(defaults, key)
        want = type(default)
        ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            out[key], ok = float(value), True
        if not ok:
            raise SystemExit(f"{flag} {key}={value!r}: must be {want.__name__} (fix: e.g. {flag} "
                             f"{key}={json.dumps(default)})")
    return out


def _part_key(cls, key: str, parts: dict) -> tuple[str, str] | None:
    """``"outcome.blocks"`` -> ``("outcome", "blocks")`` for a part's (a stage's) field; None for the config's own."""
    if hasattr(cls, "part_key"):  # a model config (its parts' flat names too, as folders wrote them)
        return cls.part_key(key)
    part, dot, name = key.partition(".")
    return (part, name) if dot and part in parts and name in {f.name for f in dataclasses.fields(parts[part])} else None


def nested(changes: dict) -> dict:
    """Dotted changes (``{"augment.rotate": False}``) as ``TrainConfig.replace`` takes them (``{"augment": {...}}``)."""
    out: dict = {}
    for key, value in changes.items():
        part, dot, name = key.partition(".")
        if dot:
            out.setdefault(part, {})[name] = value
        else:
            out[key] = value
    return out


def _with_ci(scores: dict, key: str) -> str:
    """``0.885 [0.856, 0.912]``: a score and its 95% interval when there is one."""
    ci = scores.get(f"{key}_ci95")
    return f"{scores[key]:.3f}" + ("" if not ci else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def _summary(result: dict) -> str:
    across = result.get("across_seeds") or {}
    seeds_table = []
    if len(result.get("seeds", [])) > 1:
        seeds_table = [f"the autorater over seeds {', '.join(map(str, result['seeds']))}: mean (min-max)"]
        for name, st in across.items():
            if st is not None:
                seeds_table.append(f"  {name:<28} {st['mean']:.3f} ({st['min']:.3f}-{st['max']:.3f})")
        seeds_table.append("")
    names = list(result["held_out"])
    known = ["autorater", "autorater_calibrated", "babyai_grid", "general", "instruction_blind", "last_frame",
             "barcode", "majority", "human_majority", "human_annotator_mean"]
    present = {m for n in names for m in result["held_out"][n]["methods"]}
    methods = [m for m in known if m in present] + sorted(present - set(known))
    lines = seeds_table + [f"balanced accuracy / AUROC against the simulator truth (seed "
                           f"{result.get('seeds', [0])[0]}, the preset {result.get('preset')}, beside the baselines)",
                           f"{'method':<22}" + "".join(f"{n:>19}" for n in names)]
    for m in methods:
        row = []
        for n in names:
            score = result["held_out"][n]["methods"].get(m)  # absent: --autorater-only, or another world
            o = None if score is None else score["outcome"]
            row.append("-" if o is None else f"{o['balanced_accuracy']:.3f}"
                       + ("" if o.get("auroc") is None else f" / {o['auroc']:.3f}"))
        lines.append(f"{m:<22}" + "".join(f"{v:>19}" for v in row))
    t = result["train"]
    pooled = result.get("unseen_scenarios_pooled")
    if pooled:
        lines.append(f"autorater on unseen scenarios, both draws pooled ({pooled['n']} continuations): balanced "
                     f"accuracy {_with_ci(pooled, 'balanced_accuracy')}, AUROC {_with_ci(pooled, 'auroc')} (95% "
                     f"intervals over scenarios)")
    relatives = result.get("unseen_tasks_by_relatives")
    for group in ("with_relatives", "without_relatives"):
        if relatives and group in relatives:
            g = relatives[group]
            lines.append(f"unseen tasks {group.replace('_', ' a ', 1).replace('relatives', 'relative')} in training "
                         f"({len(g['tasks'])} tasks, {g['n']} continuations): balanced accuracy "
                         f"{_with_ci(g, 'balanced_accuracy')}, AUROC {_with_ci(g, 'auroc')}")
    modes = result.get("unseen_scenarios_failure_modes")
    if modes and modes["n"]:
        lines.append(f"failure mode on unseen scenarios, both draws pooled: right on {modes['accuracy']:.3f} of "
                     f"{modes['n']} true failures predicted as failures; per category: "
                     + ", ".join(f"{k} {v['accuracy']:.2f} ({v['n']})" for k, v in modes["by_category"].items()))
        for true, row in modes["confusion"].items():
            lines.append(f"  true {true:<16} predicted " + ", ".join(f"{p} {c}" for p, c in row.items()))
    lines.append("")
    for method, how in (("autorater", "raw"), ("autorater_calibrated", "less the offset fitted on the training "
                                                                       "suite's references")):
        marker = result["held_out"]["unseen_scenarios"]["methods"][method]["marker"]
        lines.append(f"marker median |error| (unseen scenarios, gold successes predicted as such), {how}: "
                     f"{marker['median_abs_error_s']:.3f} s, within 0.5 s: {marker['within_0_5s']:.2f}")
    c = result["calibration"]
    pol = c["policy"]
    lines.append("selective policy on the training suite's references (0.95 / 90%): "
                 + (f"auto if max(p, 1-p) >= {pol['t_success']:.3f}, bound {pol['bound']:.3f}, expected coverage "
                    f"{pol['expected_coverage']:.2f}" if pol["feasible"] else "no operating point"))
    for n, sel in result.get("selective", {}).items():
        agreement = "-" if sel["agreement"] is None else f"{sel['agreement']:.3f}"
        lines.append(f"  {n:<18} ECE {sel['ece_raw']:.3f} raw, {sel['ece_calibrated']:.3f} calibrated; "
                     f"auto-labelled {sel['coverage']:.2f} at agreement {agreement}")
    lines.append(f"marker offset: {c['marker_offset_success_s']:+.3f} s on successes, "
                 f"{c['marker_offset_failure_s']:+.3f} s on failures ({c['marker_offset_n']} references)")
    if t.get("reused"):
        lines.append(f"model: {t['reused']}, re-scored (its training took {t['wall_s']} s)")
    else:
        lines.append(f"training: {t['continuations']} continuations, {t['wall_s']:.0f} s wall (features encoded "
                     f"once, cached), peak RSS {t['peak_rss_gib']} GiB")
    tp = result["throughput"]
    lines.append(f"prediction end to end: {tp['predict_videos_per_s']} videos/s; decode only: "
                 f"{tp['decode_videos_per_s']} videos/s (2 cores)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())


# The benchmark built small, run by tests/test_benchmark_modules.py (a benchmark that drifts from the product fails
# there, not on the day someone runs it).


def tiny(tmp_path=None):
    """The general model with a variant's changes (``--set``), built and run on two clips."""
    from autorater.models import PRESETS
    from benchmarks import rate_tiny

    config = PRESETS["tiny-general"]
    return rate_tiny(config.replace(**parse_overrides(["outcome.members=1", "queries=3"], type(config))))
