"""The synthetic STS-style suite generator on BabyAI, and instruction swaps.

A *scenario* is (level, environment seed, instruction, a replayed expert context, a takeover point):
the BabyAI expert bot plays 20-50% of its own solution (so the task is not solved at the takeover),
then an agent acts alone for a fixed number of steps, the same for every continuation of the
scenario: ``ceil(R x U(2, 3)) + 16`` steps clipped to [32, 160], R being the expert's remaining steps
to success (generous slack, so slow agents can still succeed). The agent keeps acting after success
or failure until the end: no early cut, no frozen tail. Frame 0 is the initial state, then one frame
per step (8 fps by default); the instruction is never drawn. Scenarios cycle over the levels;
agents are dealt to continuations from shuffled decks, so each gets about the same number.

Ground truth comes from the simulator (``data.babyai``: success when the instruction's verifier says
so; failure at the first evident irreversible mistake that the expert would not have made; else a
timeout at the end). Annotations come from simulated annotators (``data.annotators``); references
are the truth of a seeded ~15% subset, stratified by agent and category, and every annotator of the
pool labels every reference episode (gold questions are served to everyone, which is what lets
them measure the annotators); other continuations get ``annotators`` labels each.

Files written (besides the standard suite files and ``videos/<continuation_id>.mp4``):

``simulator_truth.jsonl`` — one line per continuation, the full simulator truth:
    ``continuation_id``, ``scenario_id``, ``agent``, ``level`` (short name), ``level_id``,
    ``env_seed``, ``instruction``, ``instruction_spec`` (``data.babyai`` spec), ``category``,
    ``outcome``, ``marker_s`` (success: frame of success / fps; mistake: its frame / fps; timeout:
    num_frames / fps), ``failure_mode`` (``wrong_object``, ``wrong_placement``, ``wrong_door``,
    ``timeout``; null on success), ``event_frame`` (frame first showing the success or mistake;
    null for a timeout), ``num_frames``, ``fps``, ``duration_s``, ``takeover_frame``, ``takeover_s``,
    ``actions`` (every action from frame 0, context included: 0 left, 1 right, 2 forward, 3 pickup,
    4 drop, 5 toggle), ``distractor_spec`` (the distractor's own instruction, else null), and
    ``traits``: ``n_matching``/``n_matching_fixed`` (objects the instruction could mean),
    ``has_location``, ``near_miss`` / ``near_miss_frame`` (one action away from success, or a mistake
    on a look-alike), ``off_expert_share`` (share of continuation steps before the event that differ
    from the expert's move), and the derived ``messiness`` and ``ambiguity`` the annotators react to.

Example:
    >>> generate_suite("suites/tiny", scenarios=4, continuations_per_scenario=2)   # doctest: +SKIP
    >>> swap_instructions("suites/tiny", "suites/tiny-swapped", seed=1)             # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from data.annotators import default_pool, simulate_annotations, trait_scores
from data.babyai import (AGENTS, LEVELS, AgentContext, Judge, RenderConfig, alternative_specs,
                         check_agents, describe, expert_solution, instr_to_spec, make_env,
                         make_policy, render_frame, replay, resolve_level)
from data.suite import TRUTH_FILE, Continuation, Reference, Scenario, Suite, SuiteInfo, load_truth, write_jsonl
from data.video import write_video

__all__ = ["generate_suite", "swap_instructions", "simulate_truths", "load_truth", "LEVELS", "AGENTS",
           "DEFAULT_LEVELS", "DEFAULT_AGENTS", "TRUTH_FILE"]

DEFAULT_LEVELS = ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
DEFAULT_AGENTS = ("expert", "noisy-0.2", "noisy-0.5", "distractor", "random")

CONTEXT_SHARE = (0.2, 0.5)  # share of the expert's solution replayed as context
MIN_SOLUTION_STEPS = 5  # shorter tasks leave nothing to do after the context
SLACK = (2.0, 3.0)  # continuation steps = ceil(remaining expert steps x U(SLACK)) + EXTRA_STEPS
EXTRA_STEPS = 16
HORIZON_RANGE = (32, 160)


@dataclass
class _Plan:
    index: int
    level: str
    level_id: str
    env_seed: int
    spec: dict
    instruction: str
    context: list[int]
    horizon: int
    expert_remaining: int
    distractor_specs: list[dict]

    @property
    def scenario_id(self) -> str:
        return f"s{self.index:04d}"

    @property
    def num_frames(self) -> int:
        return 1 + len(self.context) + self.horizon


@dataclass
class _Job:
    index: int
    level: str
    agents: list[str]
    first_continuation: int
    seed: int
    out: str
    render: RenderConfig
    fps: float
    version: str


def _names(value: str | Sequence[str]) -> list[str]:
    """A list of names; a comma-separated string is split."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def _plan_scenario(index: int, level: str, seed: int) -> _Plan:
    """Draw an environment seed whose task suits a scenario, and the context / horizon."""
    short, level_id = resolve_level(level)
    rng = _rng(seed, index, 0)
    for _ in range(500):
        env_seed = int(rng.integers(0, 2**31 - 1))
        env = make_env(level_id, env_seed)
        spec = instr_to_spec(env.instrs)
        instruction = env.mission
        alternatives = alternative_specs(env, spec)
        solution = expert_solution(env, spec)
        if not alternatives or solution is None or len(solution) < MIN_SOLUTION_STEPS:
            continue
        n = len(solution)
        context = min(max(int(round(rng.uniform(*CONTEXT_SHARE) * n)), 1), n - 3)
        remaining = n - context
        horizon = int(math.ceil(remaining * rng.uniform(*SLACK))) + EXTRA_STEPS
        horizon = min(max(horizon, HORIZON_RANGE[0]), HORIZON_RANGE[1])
        return _Plan(index, short, level_id, env_seed, spec, instruction, solution[:context], horizon,
                     remaining, alternatives)
    raise RuntimeError(f"no usable environment seed for level {level} in 500 tries (scenario {index})")


def _run_scenario(job: _Job) -> dict:
    """Plan one scenario and record its continuations (videos written here). Spawn-safe."""
    plan = _plan_scenario(job.index, job.level, job.seed)
    video_dir = Path(job.out) / "videos"
    context_frames = None
    continuations, truths = [], []
    for k, agent in enumerate(job.agents):
        cid = f"c{job.first_continuation + k:06d}"
        rng = _rng(job.seed, job.index, 1, k)
        frames, actions, truth, distractor = _run_continuation(plan, agent, rng, job.render, job.fps,
                                                               context_frames)
        context_frames = frames[:len(plan.context) + 1]
        write_video(video_dir / f"{cid}.mp4", np.stack(frames), fps=job.fps)
        continuations.append({"continuation_id": cid, "scenario_id": plan.scenario_id, "agent_id": agent,
                              "video": f"videos/{cid}.mp4"})
        truths.append(_truth_record(cid, plan, agent, truth, actions, job.fps, distractor))
    category = plan.spec["verb"]
    scenario = {"scenario_id": plan.scenario_id, "instruction": plan.instruction, "category": category,
                "tags": [plan.level, job.version], "takeover_s": round(len(plan.context) / job.fps, 6),
                "metadata": {"level": plan.level, "level_id": plan.level_id, "env_seed": plan.env_seed,
                             "instruction_spec": plan.spec, "context_steps": len(plan.context),
                             "continuation_steps": plan.horizon, "num_frames": plan.num_frames}}
    return {"index": job.index, "scenario": scenario, "continuations": continuations, "truths": truths}


def _run_continuation(plan: _Plan, agent: str, rng: np.random.Generator, render: RenderConfig | None,
                      fps: float, context_frames: list | None):
    """Play one continuation; frames are rendered unless ``render`` is None (truth only)."""
    env = make_env(plan.level_id, plan.env_seed)
    takeover = len(plan.context)
    judge = Judge(env, plan.spec, takeover_step=takeover)
    distractor = None
    if agent == "distractor":
        distractor = plan.distractor_specs[int(rng.integers(len(plan.distractor_specs)))]
    ctx = AgentContext(spec=plan.spec, horizon=plan.horizon, expert_remaining=plan.expert_remaining,
                       distractor_spec=distractor)
    policy = make_policy(agent, env, ctx, rng)
    if render is None:
        frames = []
    else:
        frames = list(context_frames) if context_frames is not None else [render_frame(env, render)]
    actions: list[int] = []

    def step(action: int, draw: bool) -> None:
        judge.before()
        env.step(action)
        judge.after(action)
        policy.observe(action)
        actions.append(int(action))
        if draw:
            frames.append(render_frame(env, render))

    for action in plan.context:
        policy.sync()
        step(action, draw=render is not None and context_frames is None)
    if judge.done:  # never: the context is a strict prefix of the expert's own solution
        raise RuntimeError(f"scenario {plan.scenario_id}: an event happened during the context")
    for _ in range(plan.horizon):
        step(policy.act(), draw=render is not None)
    truth = judge.result(len(actions) + 1, fps)
    return frames, actions, truth, distractor


def _truth_record(cid: str, plan: _Plan, agent: str, truth, actions: list[int], fps: float,
                  distractor: dict | None) -> dict:
    takeover = len(plan.context)
    traits = dict(truth.traits)
    traits["messiness"], traits["ambiguity"] = trait_scores(truth.outcome, traits, takeover, truth.event_frame,
                                                            truth.num_frames)
    return {"continuation_id": cid, "scenario_id": plan.scenario_id, "agent": agent, "level": plan.level,
            "level_id": plan.level_id, "env_seed": plan.env_seed, "instruction": plan.instruction,
            "instruction_spec": plan.spec, "category": plan.spec["verb"], "outcome": truth.outcome,
            "marker_s": truth.marker_s, "failure_mode": truth.failure_mode, "event_frame": truth.event_frame,
            "num_frames": truth.num_frames, "fps": fps, "duration_s": round(truth.num_frames / fps, 6),
            "takeover_frame": takeover, "takeover_s": round(takeover / fps, 6), "actions": actions,
            "distractor_spec": distractor, "traits": traits}


def simulate_truths(levels: Sequence[str] = DEFAULT_LEVELS, agents: Sequence[str] = DEFAULT_AGENTS,
                    scenarios: int = 40, continuations_per_scenario: int = 2, seed: int = 0,
                    fps: float = 8.0) -> list[dict]:
    """The ``simulator_truth.jsonl`` records ``generate_suite`` would write for the same arguments,
    without rendering or writing anything (fast: for tests, tuning and quick statistics)."""
    level_names = [resolve_level(level)[0] for level in _names(levels)]
    agents = check_agents(_names(agents))
    dealt = _deal_agents(agents, scenarios, continuations_per_scenario, seed)
    out = []
    for i in range(scenarios):
        plan = _plan_scenario(i, level_names[i % len(level_names)], seed)
        for k, agent in enumerate(dealt[i]):
            cid = f"c{i * continuations_per_scenario + k:06d}"
            _, actions, truth, distractor = _run_continuation(plan, agent, _rng(seed, i, 1, k), None, fps, None)
            out.append(_truth_record(cid, plan, agent, truth, actions, fps, distractor))
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
    """A seeded subset of ``round(share x n)`` continuations, spread over (agent, category) in
    proportion (largest remainders, random tie-breaks), random within each group."""
    rng = _rng(seed, 0x5EF)
    groups: dict[tuple[str, str], list[str]] = {}
    for t in truths:
        groups.setdefault((t["agent"], t["category"]), []).append(t["continuation_id"])
    keys = sorted(groups)
    quotas = np.array([share * len(groups[k]) for k in keys])
    counts = np.floor(quotas).astype(int)
    extra = int(round(share * len(truths))) - int(counts.sum())
    order = np.lexsort((rng.random(len(keys)), -(quotas - counts)))  # largest remainder first
    counts[order[:max(0, extra)]] += 1
    chosen: set[str] = set()
    for key, n in zip(keys, counts):
        ids = groups[key]
        chosen.update(ids[i] for i in rng.permutation(len(ids))[:n])
    return chosen


def _annotate(truths: list[dict], references: set[str], annotators: int, seed: int) -> list:
    pool = default_pool()
    if annotators > len(pool):
        raise ValueError(f"annotators={annotators} is more than the pool of {len(pool)} annotators")
    refs = [t for t in truths if t["continuation_id"] in references]
    rest = [t for t in truths if t["continuation_id"] not in references]
    labels = simulate_annotations(rest, annotators, seed, pool) + simulate_annotations(refs, len(pool), seed, pool)
    order = {t["continuation_id"]: i for i, t in enumerate(truths)}
    return sorted(labels, key=lambda a: (order[a.continuation_id], a.annotator_id))


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


def generate_suite(out: str | os.PathLike, levels: Sequence[str] = DEFAULT_LEVELS,
                   agents: Sequence[str] = DEFAULT_AGENTS, scenarios: int = 40, continuations_per_scenario: int = 2,
                   annotators: int = 3, seed: int = 0, workers: int = 2, reference_share: float = 0.15,
                   fps: float = 8.0, tile_size: int | None = None, view: str = "ego", image_size: int = 112,
                   version: str = "v1", name: str = "babyai-sts", progress: bool = True) -> Path:
    """Generate a synthetic STS-style suite on BabyAI levels (see the module docstring).

    Args:
        out: a new (or empty) folder for the suite.
        levels: BabyAI levels, short names or gym ids (``LEVELS``); scenarios cycle over them.
        agents: agent names (``AGENTS``).
        scenarios: number of scenarios.
        continuations_per_scenario: continuations (agents) recorded per scenario.
        annotators: simulated annotators per non-reference continuation.
        seed: the seed; the suite does not depend on ``workers``.
        workers: processes.
        reference_share: share of continuations that become reference episodes.
        fps: frames per second (one frame per environment step).
        tile_size: pixels per grid cell; None fits the grid into ``image_size``.
        view: ``"ego"`` (the agent's own 7x7 view, as STS videos are first-person; the default) or ``"full"``
            (the whole grid from above).
        image_size: frame width and height in pixels (even); 112 puts each first-person tile on 16 pixels.
        version: the suite version (also a tag of every scenario).
        name: the suite name.
        progress: show a progress bar.

    Returns:
        The suite folder.
    """
    out = Path(out)
    level_names = [resolve_level(level)[0] for level in _names(levels)]
    agents = check_agents(_names(agents))
    if scenarios < 1 or continuations_per_scenario < 1:
        raise ValueError("scenarios and continuations_per_scenario must be >= 1")
    if not 0.0 <= reference_share <= 1.0:
        raise ValueError(f"reference_share must be in [0, 1], got {reference_share}")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    if not 1 <= annotators <= len(default_pool()):
        raise ValueError(f"annotators must be between 1 and {len(default_pool())}, got {annotators}")
    render = RenderConfig(view=view, image_size=image_size, tile_size=tile_size)
    _prepare_out(out)

    dealt = _deal_agents(agents, scenarios, continuations_per_scenario, seed)
    jobs = [_Job(i, level_names[i % len(level_names)], dealt[i], i * continuations_per_scenario, seed, str(out),
                 render, float(fps), version) for i in range(scenarios)]
    results = _map(_run_scenario, jobs, workers, progress, scenarios * continuations_per_scenario,
                   [continuations_per_scenario] * scenarios, "generating")

    scenario_records = [Scenario(**r["scenario"]) for r in results]
    continuation_records = [Continuation(**c) for r in results for c in r["continuations"]]
    truths = [t for r in results for t in r["truths"]]
    references = _choose_references(truths, reference_share, seed)
    info = SuiteInfo(
        name=name, version=version, created_at=_created_at(),
        description=(f"Synthetic STS-style suite on BabyAI ({', '.join(level_names)}): {scenarios} scenarios x "
                     f"{continuations_per_scenario} continuations by agents of graded skill; annotations by "
                     f"simulated annotators; references and {TRUTH_FILE} from the simulator."),
        source={"generator": "data.generate.generate_suite", "levels": level_names, "agents": agents,
                "scenarios": scenarios, "continuations_per_scenario": continuations_per_scenario,
                "annotators": annotators, "annotator_pool": len(default_pool()), "annotations": "simulated",
                "seed": seed, "reference_share": reference_share, "fps": fps, "tile_size": tile_size, "view": view,
                "image_size": image_size, "minigrid": _minigrid_version(), "truth_file": TRUTH_FILE})
    suite = Suite(out, info, scenario_records, continuation_records,
                  annotations=_annotate(truths, references, annotators, seed),
                  references=[_reference(t) for t in truths if t["continuation_id"] in references])
    suite.write(out)
    write_jsonl(out / TRUTH_FILE, truths)
    return out


def _minigrid_version() -> str:
    from importlib.metadata import version

    return version("minigrid")


# ----------------------------------------------------------------------------------------------
# Instruction swaps


def _choose_swap(scenario: Scenario, truths: list[dict], seed: int, index: int) -> tuple[dict, str] | None:
    """Another instruction for this scenario whose truth the context does not already decide."""
    meta = scenario.metadata
    level, env_seed, spec = meta["level"], meta["env_seed"], meta["instruction_spec"]
    takeover = meta["context_steps"]
    context = truths[0]["actions"][:takeover]
    rng = _rng(seed, index, 0x5A9)
    env = make_env(level, env_seed)
    same = alternative_specs(env, spec)
    other = [s for s in alternative_specs(env, spec, other_verbs=True) if s["verb"] != spec["verb"]]
    same = [same[i] for i in rng.permutation(len(same))]
    other = [other[i] for i in rng.permutation(len(other))]
    candidates = other + same if rng.random() < 0.3 else same + other  # other verbs: ~30%, or as a fallback
    for new in candidates:
        env = make_env(level, env_seed)
        instruction = describe(new, env)
        judge = Judge(env, new, takeover)
        for action in context:
            judge.before()
            env.step(action)
            judge.after(action)
        if not judge.done:
            return new, instruction
    return None


def _swap_scenario(item) -> dict:
    """Spawn-safe: the new instruction of one scenario and the truth of its continuations."""
    scenario_obj, truths, seed, index = item
    scenario = Scenario(**scenario_obj)
    chosen = _choose_swap(scenario, truths, seed, index)
    if chosen is None:
        return {"index": index, "spec": None, "instruction": None, "truths": []}
    spec, instruction = chosen
    meta = scenario.metadata
    new_truths = []
    for t in truths:
        truth = replay(meta["level"], meta["env_seed"], spec, t["actions"], t["takeover_frame"], t["fps"])
        traits = dict(truth.traits)
        traits["messiness"], traits["ambiguity"] = trait_scores(truth.outcome, traits, t["takeover_frame"],
                                                                truth.event_frame, truth.num_frames)
        if truth.num_frames != t["num_frames"]:
            raise RuntimeError(f"{t['continuation_id']}: replay gives {truth.num_frames} frames, "
                               f"the truth file says {t['num_frames']}")
        new_truths.append({**t, "instruction": instruction, "instruction_spec": spec, "category": spec["verb"],
                           "outcome": truth.outcome, "marker_s": truth.marker_s,
                           "failure_mode": truth.failure_mode, "event_frame": truth.event_frame,
                           "traits": traits, "original_instruction": t["instruction"],
                           "original_outcome": t["outcome"]})
    return {"index": index, "spec": spec, "instruction": instruction, "truths": new_truths}


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def swap_instructions(suite_dir: str | os.PathLike, out_dir: str | os.PathLike, seed: int = 0,
                      workers: int = 1, progress: bool = False) -> Path:
    """A new suite with the same videos and, per scenario, an altered instruction.

    The new instruction names another object in the scene with the same verb (or, for about 30% of
    scenarios, another verb on the same object where BabyAI allows it), chosen so the replayed
    context decides nothing. The truth is recomputed by replaying each continuation's recorded
    actions from the same seed against the new instruction, with the same rules. Writes
    ``references.jsonl`` and ``simulator_truth.jsonl`` for every continuation (each truth line also
    keeps ``original_instruction`` and ``original_outcome``); no annotations. Videos are hard links
    (copies across file systems). Scenarios with no usable alternative are left out.

    Args:
        suite_dir: a suite written by ``generate_suite`` (it needs ``simulator_truth.jsonl``).
        out_dir: a new (or empty) folder.
        seed: the seed.
        workers: processes.
        progress: show a progress bar.
    """
    src, out = Path(suite_dir), Path(out_dir)
    suite = Suite.load(src)
    truth_by_scenario: dict[str, list[dict]] = {}
    for t in load_truth(src):
        truth_by_scenario.setdefault(t["scenario_id"], []).append(t)
    _prepare_out(out)
    items = [(_scenario_dict(s), truth_by_scenario.get(s.scenario_id, []), seed, i)
             for i, s in enumerate(suite.scenarios)]
    results = _map(_swap_scenario, items, workers, progress, len(suite.continuations),
                   [len(it[1]) for it in items], "swapping")

    scenarios, continuations, truths = [], [], []
    for s, res in zip(suite.scenarios, results):
        if res["spec"] is None:
            continue
        scenarios.append(Scenario(
            scenario_id=s.scenario_id, instruction=res["instruction"], category=res["spec"]["verb"],
            tags=list(s.tags) + ["instruction-swap"], takeover_s=s.takeover_s,
            metadata={**s.metadata, "instruction_spec": res["spec"], "original_instruction": s.instruction,
                      "original_instruction_spec": s.metadata.get("instruction_spec")}))
        truths.extend(res["truths"])
    kept = {t["continuation_id"] for t in truths}
    for c in suite.continuations:
        if c.continuation_id in kept:
            continuations.append(Continuation(continuation_id=c.continuation_id, scenario_id=c.scenario_id,
                                              agent_id=c.agent_id, video=c.video, takeover_s=c.takeover_s,
                                              metadata=dict(c.metadata)))
            _link_or_copy(src / c.video, out / c.video)
    info = SuiteInfo(name=f"{suite.info.name}-swapped", version=suite.info.version, created_at=_created_at(),
                     description=f"{suite.info.name} {suite.info.version} with one altered instruction per "
                                 f"scenario; truth recomputed by replay against the new instruction.",
                     source={**suite.info.source, "instruction_swap": {"from": str(src), "seed": seed}})
    Suite(out, info, scenarios, continuations, references=[_reference(t) for t in truths]).write(out)
    write_jsonl(out / TRUTH_FILE, truths)
    return out


def _scenario_dict(s: Scenario) -> dict:
    d = asdict(s)
    d.pop("extra", None)
    return d
