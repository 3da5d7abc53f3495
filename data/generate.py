"""The synthetic STS-style suite generator over worlds (BabyAI, Meta-World, the toy world), and instruction swaps.

A world (``autorater.data.worlds``: a ``World`` class registered by an entry point, with its options dataclass) plans
scenarios and plays their continuations; this module does what every world shares: scenarios cycle over the chosen
tasks; agents are dealt to continuations from shuffled decks (each gets about the same number); references are the
truth of a seeded subset of whole scenarios (15% by default), stratified by category, and every annotator of the pool
labels every reference episode (gold questions are served to everyone, which is what lets them measure the
annotators); other continuations get ``annotators`` labels each from simulated annotators
(``autorater.data.annotators``). The suite does not depend on the number of worker processes.

Files written (besides the standard suite files and ``videos/<continuation_id>.mp4``):
``simulator_truth.jsonl``, one line per continuation, the full simulator truth (each world's
``scenes`` module lists its fields; every world writes ``continuation_id``, ``scenario_id``, ``agent``,
``instruction``, ``category``, ``outcome``, ``marker_s``, ``failure_mode``, ``event_frame``,
``num_frames``, ``fps``, ``duration_s``, ``takeover_frame``, ``takeover_s`` and ``traits``).

Example:
    >>> generate_suite("suites/tiny", scenarios=4, continuations_per_scenario=2)   # doctest: +SKIP
    >>> generate_suite("suites/arm", world="metaworld", tasks=["drawer-open-v3"])  # doctest: +SKIP
    >>> generate_suite("suites/toy", world="toy", options={"grid_size": 6})        # doctest: +SKIP
    >>> swap_instructions("suites/tiny", "suites/tiny-swapped", seed=1)             # doctest: +SKIP
    >>> generate_suite("suites/tiny-v2", scenarios=4, version="v2", grow="suites/tiny")  # doctest: +SKIP

Every scenario carries the tag ``version:<version>`` of the version it came in (``autorater.data.versions``). With
``grow``, the new suite is an earlier one plus new scenarios: the earlier suite's scenarios (their version tags
kept), continuations, labels, references and truth are copied (videos hard-linked) and the new scenarios are numbered
after them, so ``autorater suite diff`` of the two shows what was added.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from autorater.data.annotators import default_pool, simulate_annotations
from autorater.data.files import FolderChange
from autorater.data.stats import agent_rule_balanced_accuracy
from autorater.data.suite import (
    SWAP_TAG,
    TRUTH_FILE,
    Continuation,
    Reference,
    Scenario,
    Suite,
    SuiteInfo,
    jsonl_bytes,
    load_truth,
)
from autorater.data.versions import with_version_tag
from autorater.data.worlds import (
    DEFAULT_WORLD,
    WORLDS,
    ScenarioJob,
    SwapJob,
    World,
    WorldOptions,
    load_world,
    options_of,
    world_of,
)

__all__ = ["generate_suite", "swap_instructions", "simulate_truths", "load_truth", "link_or_copy", "DEFAULT_WORLD",
           "TRUTH_FILE", "WORLDS"]

GENERATOR = "data.generate.generate_suite"
# The default world's tasks and agents under the names of the time before worlds (BabyAI's levels), for older callers:
# read from the default world when first asked
_DEFAULT_WORLD_NAMES = {"LEVELS": "TASKS", "DEFAULT_LEVELS": "DEFAULT_TASKS", "AGENTS": "AGENTS",
                        "DEFAULT_AGENTS": "DEFAULT_AGENTS"}


def __getattr__(name: str):
    if name in _DEFAULT_WORLD_NAMES:
        return getattr(load_world(DEFAULT_WORLD), _DEFAULT_WORLD_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _names(value: str | Sequence[str]) -> list[str]:
    """A list of names; a comma-separated string is split."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def _setup(world: str | World, tasks, levels, agents) -> tuple:
    """The world, its canonical task names and its checked agents (``levels``: another name for tasks)."""
    module = load_world(world) if isinstance(world, str) else world
    if tasks is not None and levels is not None:
        raise ValueError("pass tasks or levels (BabyAI's name for them), not both")
    chosen = tasks if tasks is not None else levels
    task_names = module.resolve_tasks(_names(chosen if chosen is not None else module.DEFAULT_TASKS))
    agent_names = module.check_agents(_names(agents if agents is not None else module.DEFAULT_AGENTS))
    if not task_names:
        raise ValueError(f"no tasks given; choose from {', '.join(module.TASKS)}")
    return module, task_names, agent_names


def _job_options(module: World, options: WorldOptions | dict | None, more: dict, fps: float | None) -> tuple:
    """The frame rate (None: the world's) and the world's ``check_options`` dict for ``options`` and ``more``."""
    fps = module.FPS if fps is None else fps
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    checked = options_of(module, options, **more)
    return fps, module.check_options(fps=fps, **{f.name: getattr(checked, f.name) for f in fields(checked)})


def simulate_truths(*, world: str | World = DEFAULT_WORLD, options: WorldOptions | dict | None = None,
                    tasks: Sequence[str] | None = None, agents: Sequence[str] | None = None, scenarios: int = 40,
                    continuations_per_scenario: int = 2, seed: int = 0, fps: float | None = None,
                    levels: Sequence[str] | None = None, **world_options) -> list[dict]:
    """The ``simulator_truth.jsonl`` records ``generate_suite`` would write for the same arguments,
    without rendering or writing anything (fast: for tests, tuning and quick statistics)."""
    module, task_names, agent_names = _setup(world, tasks, levels, agents)
    fps, opts = _job_options(module, options, world_options, fps)
    dealt = _deal_agents(agent_names, scenarios, continuations_per_scenario, seed)
    out = []
    for i in range(scenarios):
        job = ScenarioJob(i, task_names[i % len(task_names)], dealt[i], i * continuations_per_scenario, seed, None,
                          float(fps), "v1", opts)
        out.extend(module.run_scenario(job)["truths"])
    return out


def _deal_agents(agents: Sequence[str], scenarios: int, per_scenario: int, seed: int) -> list[list[str]]:
    """Agents per scenario, dealt from shuffled decks: near-equal totals, no repeats within a scenario
    while there are enough agents."""
    rng = _rng(seed, 0xA9E)
    deck: list[str] = []
    out = []
    for _ in range(scenarios):
        chosen: list[str] = []
        for _ in range(per_scenario):
            if not deck:
                deck = [agents[i] for i in rng.permutation(len(agents))]
            j = next((j for j, a in enumerate(deck) if a not in chosen), 0)
            chosen.append(deck.pop(j))
        out.append(chosen)
    return out


def _choose_references(truths: list[dict], share: float, seed: int) -> set[str]:
    """Every continuation of a seeded subset of ``round(share x scenarios)`` whole scenarios (at least one when
    ``share`` > 0 and there are two or more), spread over the
    categories in proportion (largest remainders, random tie-breaks), random within each category.

    Whole scenarios, so that a model trained on the rest never saw a reference's scene, camera or setup: the
    references measure it on unseen scenarios, as the suite's users will (training leaves out every scenario
    that holds a reference, ``training.dataset.build_examples``)."""
    rng = _rng(seed, 0x5EF)
    scenarios: dict[str, list[str]] = {}
    category: dict[str, str] = {}
    for t in truths:
        scenarios.setdefault(t["scenario_id"], []).append(t["continuation_id"])
        category[t["scenario_id"]] = t["category"]
    groups: dict[str, list[str]] = {}
    for sid in scenarios:
        groups.setdefault(category[sid], []).append(sid)
    keys = sorted(groups)
    quotas = np.array([share * len(groups[k]) for k in keys])
    counts = np.floor(quotas).astype(int)
    wanted = int(round(share * len(scenarios)))
    if share > 0 and len(scenarios) > 1:
        wanted = max(1, wanted)  # a small suite still gets a reference scenario
    extra = wanted - int(counts.sum())
    order = np.lexsort((rng.random(len(keys)), -(quotas - counts)))  # largest remainder first
    counts[order[:max(0, extra)]] += 1
    chosen: set[str] = set()
    for key, n in zip(keys, counts):
        sids = groups[key]
        for i in rng.permutation(len(sids))[:n]:
            chosen.update(scenarios[sids[i]])
    return chosen


def _annotate(truths: list[dict], references: set[str], annotators: int, seed: int) -> list:
    pool = default_pool()
    if annotators > len(pool):
        raise ValueError(f"annotators={annotators} is more than the pool of {len(pool)} annotators")
    refs = [t for t in truths if t["continuation_id"] in references]
    rest = [t for t in truths if t["continuation_id"] not in references]
    labels = (simulate_annotations(rest, annotators, seed, pool) if annotators else []) + \
        simulate_annotations(refs, len(pool), seed, pool)
    order = {t["continuation_id"]: i for i, t in enumerate(truths)}
    return sorted(labels, key=lambda a: (order[a.continuation_id], a.annotator_id))


def _agent_rule(truths: list[dict]) -> float | None:
    """The balanced accuracy of "the agent's name predicts the true outcome" on these truth lines."""
    return agent_rule_balanced_accuracy([t["agent"] for t in truths], [t["outcome"] for t in truths])


def _reference(t: dict) -> Reference:
    return Reference(continuation_id=t["continuation_id"], outcome=t["outcome"], marker_s=t["marker_s"],
                     failure_mode=t["failure_mode"])


def _map(fn, jobs: list, workers: int, progress: bool, total: int, per_job: list[int], desc: str):
    """Run ``fn`` over ``jobs`` (in-process or a spawn pool), results in job order, with a progress bar."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="continuation", disable=not progress)
    results = [None] * len(jobs)
    try:
        if workers <= 1:
            for i, job in enumerate(jobs):
                results[i] = fn(job)
                bar.update(per_job[i])
        else:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(workers) as pool:
                for i, res in pool.imap_unordered(_indexed, [(fn, i, job) for i, job in enumerate(jobs)]):
                    results[i] = res
                    bar.update(per_job[i])
    finally:
        bar.close()
    return results


def _indexed(item):
    fn, i, job = item
    return i, fn(job)


def _prepare_out(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"output folder {out} is not empty; pass a new or empty folder")
    (out / "videos").mkdir(parents=True, exist_ok=True)


def _created_at() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_suite(out: str | os.PathLike, *, world: str | World = DEFAULT_WORLD,
                   options: WorldOptions | dict | None = None, tasks: Sequence[str] | None = None,
                   agents: Sequence[str] | None = None, scenarios: int = 40, continuations_per_scenario: int = 2,
                   annotators: int = 3, seed: int = 0, workers: int = 2, reference_share: float = 0.15,
                   fps: float | None = None, version: str = "v1", name: str | None = None, progress: bool = True,
                   grow: str | os.PathLike | None = None, levels: Sequence[str] | None = None,
                   **world_options) -> Path:
    """Generate a synthetic STS-style suite in one world (see the module docstring).

    Args:
        out: a new (or empty) folder for the suite.
        world: a world's name (``WORLDS``: ``"babyai"``, ``"metaworld"``, ``"toy"``, any registered) or the world.
        options: the world's options (its ``OPTIONS`` dataclass, or a dict of its fields); None: its defaults.
        tasks: the world's tasks (BabyAI levels; Meta-World environment names such as ``drawer-open-v3``);
            None: its ``DEFAULT_TASKS``.
        agents: agent names (the world's ``AGENTS``); None: its ``DEFAULT_AGENTS``.
        scenarios: number of scenarios; they cycle over the tasks.
        continuations_per_scenario: continuations (agents) recorded per scenario.
        annotators: simulated annotators per non-reference continuation (0: none, a version that arrives
            unlabelled; its references are labelled by the whole pool).
        seed: the seed; the suite does not depend on ``workers``.
        workers: processes.
        reference_share: share of continuations that become reference episodes.
        fps: frames per second; None: the world's ``FPS`` (BabyAI: 8, one frame per step; Meta-World: 8, a frame
            every 10 control steps).
        version: the suite version (also a tag of every scenario).
        name: the suite name; None: ``<world>-sts``.
        progress: show a progress bar.
        grow: an earlier suite this one grows (see the module docstring); its name is kept unless ``name`` is given.
        levels: another name for ``tasks`` (BabyAI's word).
        **world_options: options of the world by name, over ``options`` (BabyAI: ``view``, ``image_size``,
            ``tile_size``; Meta-World: ``camera``, ``hold_out_camera``, ``hold_out_degrees``, ``image_size``; each
            world's ``OPTIONS`` says what they mean). An option of another world is refused with its world's name.

    Returns:
        The suite folder. ``suite.json``'s ``source.agent_rule_balanced_accuracy`` says how well the agent's
        name alone predicts the true outcome in it (``autorater.data.stats.agent_rule_balanced_accuracy``).

    Example:
        >>> generate_suite("suites/arm", world="metaworld", tasks=["reach-v3"], camera="random",
        ...                hold_out_camera="corner2")   # doctest: +SKIP
    """
    out = Path(out)
    module, task_names, agent_names = _setup(world, tasks, levels, agents)
    fps, options = _job_options(module, options, world_options, fps)
    if scenarios < 1 or continuations_per_scenario < 1:
        raise ValueError("scenarios and continuations_per_scenario must be >= 1")
    if not 0.0 <= reference_share <= 1.0:
        raise ValueError(f"reference_share must be in [0, 1], got {reference_share}")
    if not 0 <= annotators <= len(default_pool()):
        raise ValueError(f"annotators must be between 0 (a version that arrives unlabelled: only its references are "
                         f"labelled) and {len(default_pool())}, got {annotators}")
    base = Suite.load(grow) if grow is not None else None
    first_s, first_c = _next_indices(base)
    _prepare_out(out)

    dealt = _deal_agents(agent_names, scenarios, continuations_per_scenario, seed)
    jobs = [ScenarioJob(first_s + i, task_names[(first_s + i) % len(task_names)], dealt[i],
                        first_c + i * continuations_per_scenario, seed, str(out), float(fps), version, options)
            for i in range(scenarios)]
    results = _map(module.run_scenario, jobs, workers, progress, scenarios * continuations_per_scenario,
                   [continuations_per_scenario] * scenarios, "generating")

    scenario_records = [Scenario(**{**r["scenario"], "tags": with_version_tag(r["scenario"]["tags"], version)})
                        for r in results]
    continuation_records = [Continuation(**c) for r in results for c in r["continuations"]]
    truths = [t for r in results for t in r["truths"]]
    references = _choose_references(truths, reference_share, seed)
    common = {"generator": GENERATOR, "scenarios": scenarios, "continuations_per_scenario": continuations_per_scenario,
              "annotators": annotators, "annotator_pool": len(default_pool()), "annotations": "simulated",
              "seed": seed, "reference_share": reference_share, "fps": fps}
    info = _generated_info(module, task_names, agent_names, options, common, truths, base, name, version)
    suite = Suite(out, info, scenario_records, continuation_records,
                  annotations=_annotate(truths, references, annotators, seed),
                  references=[_reference(t) for t in truths if t["continuation_id"] in references])
    if base is not None:
        suite, truths = _grown(base, suite, truths)
    _write_with_truth(suite, out, truths)
    return out


def _generated_info(module: World, tasks: list[str], agents: list[str], options: dict, common: dict,
                    truths: list[dict], base: Suite | None, name: str | None, version: str) -> SuiteInfo:
    """suite.json of a generated suite: the world's description and source (``describe``), with the truth file, how
    well an agent's name predicts the outcome, and the suite it grows."""
    text, source = module.describe(tasks, agents, options, common)
    source["truth_file"] = TRUTH_FILE
    source["agent_rule_balanced_accuracy"] = _agent_rule(truths)
    if base is not None:
        source["grown_from"] = {"suite": str(base.root), "version": base.info.version,
                                "scenarios": len(base.scenarios)}
    return SuiteInfo(
        name=name or (base.info.name if base is not None else f"{module.NAME}-sts"), version=version,
        created_at=_created_at(),
        description=(f"{text}: {common['scenarios']} scenarios x {common['continuations_per_scenario']} "
                     f"continuations by agents of graded skill; annotations by simulated annotators; references and "
                     f"{TRUTH_FILE} from the simulator."),
        source=source)


def _write_with_truth(suite: Suite, out: Path, truths: list[dict]) -> None:
    """The suite's files and its simulator truth in one change: all of them land, or none (a crash included)."""
    with FolderChange(out) as change:
        suite.write(out, change=change)
        change.write_bytes(TRUTH_FILE, jsonl_bytes(truths))


def _next_indices(base: Suite | None) -> tuple[int, int]:
    """The first scenario and continuation numbers after those of ``base`` (0, 0 without one)."""
    if base is None:
        return 0, 0

    def after(ids, prefix: str) -> int:
        numbers = [int(i[1:]) for i in ids if i.startswith(prefix) and i[1:].isdigit()]
        return max(numbers, default=-1) + 1
    return (after(base.scenario_by_id, "s"), after(base.continuation_by_id, "c"))


def _grown(base: Suite, new: Suite, truths: list[dict]) -> tuple[Suite, list[dict]]:
    """``base`` followed by ``new``: records, labels and truth concatenated, the base's videos hard-linked."""
    for c in base.continuations:
        link_or_copy(base.root / c.video, new.root / c.video)
    try:
        base_truths = load_truth(base.root)
    except FileNotFoundError:
        base_truths = []
    scenarios = [replace(s, tags=with_version_tag(s.tags, base.info.version)) for s in base.scenarios]
    grown = Suite(new.root, new.info, scenarios + new.scenarios, base.continuations + new.continuations,
                  base.annotations + new.annotations, base.references + new.references)
    return grown, base_truths + truths


# ----------------------------------------------------------------------------------------------
# Instruction swaps


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (its folder made), or copy it where the file systems differ."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def swap_instructions(suite_dir: str | os.PathLike, out_dir: str | os.PathLike, seed: int = 0,
                      workers: int = 1, progress: bool = False, annotators: int | None = None,
                      reference_share: float = 0.15, min_success_share: float = 0.0,
                      options: WorldOptions | dict | None = None, **world_options) -> Path:
    """A new suite with the same videos and, per scenario, an altered instruction whose truth the
    simulator recomputes (each world's ``swap_scenario`` says how; BabyAI: another object or verb, the
    recorded actions replayed; Meta-World: an object absent from the scene, or the other task of a
    shared scene). The replayed context never decides the new truth.

    Without ``annotators`` (a held-out test): ``references.jsonl`` holds every continuation, no annotations.
    With ``annotators`` (a training suite of honest negatives and positives): references are a
    ``reference_share`` subset as ``generate_suite`` chooses them, and simulated annotators label the swapped
    truth as ``generate_suite``'s do (their draws seeded apart from the original suite's). Both write
    ``simulator_truth.jsonl`` for every continuation (each line also keeps ``original_instruction`` and
    ``original_outcome``). Videos are hard links (copies across file systems). Scenarios with no usable
    alternative are left out.

    Args:
        suite_dir: a suite written by ``generate_suite`` (it needs ``simulator_truth.jsonl``).
        out_dir: a new (or empty) folder.
        seed: the seed.
        workers: processes.
        progress: show a progress bar.
        annotators: simulated annotators per non-reference continuation; None: no annotations.
        reference_share: with ``annotators``, the share of continuations that become references.
        min_success_share: keep every swapped success and drop failures at random (seeded) until successes are
            at least this share (a held-out swap test that "always failure" cannot pass); 0: keep all.
        options: the swap options of the suite's world (its ``SWAP_OPTIONS`` dataclass, or a dict of its fields).
        **world_options: the same by name, over ``options``. Meta-World's: ``cross_task`` (also swap between reach,
            push and pick-place where the simulator can judge it, ``tasks.CROSS_SCENES``; off by default, so
            held-out swap suites stay as they were) and ``shared_only`` (only the judged swaps of shared scenes,
            and with ``cross_task`` of reach, push and pick-place, never an absent object: swaps that can succeed,
            so that "an instruction that does not fit the scene" is not all a model learns from them). BabyAI has
            none. An option of another world is refused with its world's name.
    """
    src, out = Path(suite_dir), Path(out_dir)
    if annotators is not None and not 1 <= annotators <= len(default_pool()):
        raise ValueError(f"annotators must be between 1 and {len(default_pool())} (or None: no annotations), "
                         f"got {annotators}")
    if not 0.0 <= reference_share <= 1.0:
        raise ValueError(f"reference_share must be in [0, 1], got {reference_share}")
    suite = Suite.load(src)
    world = world_of(suite.info.source)
    if world is None:
        raise ValueError(f"{src}: suite.json's source does not name a world of this generator; only suites "
                         f"written by generate_suite can have their instructions swapped")
    module = load_world(world)
    checked = options_of(module, options, swap=True, **world_options)
    chosen = {f.name: getattr(checked, f.name) for f in fields(checked)}
    truth_by_scenario: dict[str, list[dict]] = {}
    for t in load_truth(src):
        truth_by_scenario.setdefault(t["scenario_id"], []).append(t)
    _prepare_out(out)
    jobs = [SwapJob(i, _scenario_dict(s), truth_by_scenario.get(s.scenario_id, []), seed, chosen)
            for i, s in enumerate(suite.scenarios)]
    results = _map(module.swap_scenario, jobs, workers, progress, len(suite.continuations),
                   [len(job.truths) for job in jobs], "swapping")

    scenarios, continuations, truths = _swapped(suite, results, min_success_share, seed, out)
    swap = {"from": str(src), "seed": seed}
    if annotators is None:
        references, annotations = {t["continuation_id"] for t in truths}, []
    else:
        label_seed = int(np.random.SeedSequence([seed, 0x5A9]).generate_state(1)[0])  # apart from the original's
        references = _choose_references(truths, reference_share, label_seed)
        annotations = _annotate(truths, references, annotators, label_seed)
        swap.update(annotators=annotators, reference_share=reference_share)
    swap.update({k: v for k, v in (*chosen.items(), ("min_success_share", min_success_share)) if v})
    source = {**suite.info.source, "instruction_swap": swap, "agent_rule_balanced_accuracy": _agent_rule(truths)}
    if annotators is not None:
        source.update(annotators=annotators, annotations="simulated", reference_share=reference_share)
    info = SuiteInfo(name=f"{suite.info.name}-swapped", version=suite.info.version, created_at=_created_at(),
                     description=f"{suite.info.name} {suite.info.version} with one altered instruction per "
                                 f"scenario; truth recomputed by replay against the new instruction"
                                 + ("." if annotators is None else f"; {annotators} simulated annotators each."),
                     source=source)
    _write_with_truth(Suite(out, info, scenarios, continuations, annotations=annotations,
                            references=[_reference(t) for t in truths if t["continuation_id"] in references]),
                      out, truths)
    return out


def _without(metadata: dict, key: str) -> dict:
    """``metadata`` less ``key`` (the original instruction's paraphrases do not word a swapped one)."""
    return {k: v for k, v in metadata.items() if k != key}


def _swapped(suite: Suite, results: list[dict], min_success_share: float, seed: int,
             out: Path) -> tuple[list[Scenario], list[Continuation], list[dict]]:
    """The swapped suite's records from the worlds' answers: each scenario with its new instruction (tagged, the
    original kept in its metadata), the truths (failures thinned to ``min_success_share``), and the continuations
    that remain, their videos linked into ``out``."""
    scenarios, continuations, truths = [], [], []
    for s, res in zip(suite.scenarios, results):
        if res["instruction"] is None:
            continue
        scenarios.append(Scenario(
            scenario_id=s.scenario_id, instruction=res["instruction"], category=res["category"],
            tags=list(s.tags) + [SWAP_TAG], takeover_s=s.takeover_s,
            metadata={**_without(s.metadata, "paraphrases"), "instruction_spec": res["spec"],
                      "original_instruction": s.instruction,
                      "original_instruction_spec": s.metadata.get("instruction_spec"),
                      **({"paraphrases": res["paraphrases"]} if res.get("paraphrases") else {})}))
        truths.extend(res["truths"])
    truths = _thin_failures(truths, min_success_share, seed)
    kept = {t["continuation_id"] for t in truths}
    scenarios = [s for s in scenarios if any(t["scenario_id"] == s.scenario_id for t in truths)]
    for c in suite.continuations:
        if c.continuation_id in kept:
            continuations.append(Continuation(continuation_id=c.continuation_id, scenario_id=c.scenario_id,
                                              agent_id=c.agent_id, video=c.video, takeover_s=c.takeover_s,
                                              metadata=dict(c.metadata)))
            link_or_copy(suite.root / c.video, out / c.video)
    return scenarios, continuations, truths


def _thin_failures(truths: list[dict], min_share: float, seed: int) -> list[dict]:
    """``truths`` with failures dropped at random (seeded) until successes are at least ``min_share`` of them."""
    wins = sum(t["outcome"] == "success" for t in truths)
    if not min_share or not truths or wins >= min_share * len(truths):
        return truths
    if not wins:
        raise ValueError(f"no swapped continuation succeeds, so no share of successes can be kept (min_success_share "
                         f"{min_share}); fix: swap a suite with more scenarios, or pass min_success_share 0")
    failures = [i for i, t in enumerate(truths) if t["outcome"] != "success"]
    keep_failures = int(wins * (1 - min_share) / min_share)
    rng = _rng(seed, 0x7F1)
    dropped = set(np.array(failures)[rng.permutation(len(failures))[keep_failures:]].tolist())
    return [t for i, t in enumerate(truths) if i not in dropped]


def _scenario_dict(s: Scenario) -> dict:
    d = asdict(s)
    d.pop("extra", None)
    return d
