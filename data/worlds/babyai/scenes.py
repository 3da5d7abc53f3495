"""BabyAI scenarios: plan one, play its continuations, write their videos and truth; instruction swaps.

A *scenario* is (level, environment seed, instruction, a replayed expert context, a takeover point):
the BabyAI expert bot plays 20-50% of its own solution (so the task is not solved at the takeover),
then an agent acts alone for a fixed number of steps, the same for every continuation of the
scenario: ``ceil(R x U(2, 3)) + 16`` steps clipped to [32, 160], R being the expert's remaining steps
to success (generous slack, so slow agents can still succeed). The agent keeps acting after success
or failure until the end: no early cut, no frozen tail. Frame 0 is the initial state, then one frame
per step (8 fps by default); the instruction is never drawn.

Truth lines (``simulator_truth.jsonl``): ``continuation_id``, ``scenario_id``, ``agent``, ``level``
(short name), ``level_id``, ``env_seed``, ``instruction``, ``instruction_spec`` (``levels`` spec),
``category``, ``outcome``, ``marker_s`` (success: frame of success / fps; mistake: its frame / fps;
timeout: num_frames / fps), ``failure_mode`` (``wrong_object``, ``wrong_placement``, ``wrong_door``,
``timeout``; null on success), ``event_frame`` (frame first showing the success or mistake; null for a
timeout), ``num_frames``, ``fps``, ``duration_s``, ``takeover_frame``, ``takeover_s``, ``actions``
(every action from frame 0, context included: 0 left, 1 right, 2 forward, 3 pickup, 4 drop, 5 toggle),
``distractor_spec`` (the distractor's own instruction, else null), and ``traits``:
``n_matching``/``n_matching_fixed`` (objects the instruction could mean), ``has_location``,
``near_miss`` / ``near_miss_frame`` (one action away from success, or a mistake on a look-alike),
``off_expert_share`` (share of continuation steps before the event that differ from the expert's
move), and the derived ``messiness`` and ``ambiguity`` the annotators react to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autorater.data.annotators import trait_scores
from autorater.data.video import write_video
from autorater.data.worlds.babyai.agents import AgentContext, make_policy
from autorater.data.worlds.babyai.judge import Judge, expert_solution, replay
from autorater.data.worlds.babyai.levels import alternative_specs, describe, instr_to_spec, make_env, resolve_level
from autorater.data.worlds.babyai.render import RenderConfig, render_frame
from autorater.data.worlds.base import ScenarioJob, SwapJob

__all__ = ["run_scenario", "swap_scenario", "render_config", "seeded_rng"]

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


def seeded_rng(*key: int) -> np.random.Generator:
    """A generator for a tuple of integers (a scenario's, a continuation's): the same key, the same draws."""
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def render_config(options: dict) -> RenderConfig:
    return RenderConfig(view=options["view"], image_size=options["image_size"], tile_size=options["tile_size"])


def _plan_scenario(index: int, level: str, seed: int) -> _Plan:
    """Draw an environment seed whose task suits a scenario, and the context / horizon."""
    short, level_id = resolve_level(level)
    rng = seeded_rng(seed, index, 0)
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


def run_scenario(job: ScenarioJob) -> dict:
    """Plan one scenario and record its continuations (videos written unless ``job.out`` is None)."""
    plan = _plan_scenario(job.index, job.task, job.seed)
    render = render_config(job.options) if job.out is not None else None
    context_frames = None
    continuations, truths = [], []
    for k, agent in enumerate(job.agents):
        cid = f"c{job.first_continuation + k:06d}"
        rng = seeded_rng(job.seed, job.index, 1, k)
        frames, actions, truth, distractor = _run_continuation(plan, agent, rng, render, job.fps, context_frames)
        if render is not None:
            context_frames = frames[:len(plan.context) + 1]
            write_video(Path(job.out) / "videos" / f"{cid}.mp4", np.stack(frames), fps=job.fps)
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


# ----------------------------------------------------------------------------------------------
# Instruction swaps


def _choose_swap(meta: dict, truths: list[dict], seed: int, index: int) -> tuple[dict, str] | None:
    """Another instruction for this scenario whose truth the context does not already decide."""
    level, env_seed, spec = meta["level"], meta["env_seed"], meta["instruction_spec"]
    takeover = meta["context_steps"]
    context = truths[0]["actions"][:takeover]
    rng = seeded_rng(seed, index, 0x5A9)
    env = make_env(level, env_seed)
    same = alternative_specs(env, spec)
    other = [s for s in alternative_specs(env, spec, other_verbs=True) if s["verb"] != spec["verb"]]
    same = [same[i] for i in rng.permutation(len(same))]
    other = [other[i] for i in rng.permutation(len(other))]
    candidates = other + same if rng.random() < 0.3 else same + other  # other verbs: ~30%, or as a fallback
    for new in candidates:
        if replay(level, env_seed, new, context, takeover, fps=1.0).event_frame is None:  # the context decides nothing
            return new, describe(new, make_env(level, env_seed))
    return None


def swap_scenario(job: SwapJob) -> dict:
    """Another object with the same verb (or, for ~30% of scenarios, another verb on the same object
    where BabyAI allows it), chosen so the replayed context decides nothing; the truth of every
    continuation is recomputed by replaying its recorded actions against the new instruction."""
    meta = job.scenario["metadata"]
    chosen = _choose_swap(meta, job.truths, job.seed, job.index) if job.truths else None
    if chosen is None:
        return {"index": job.index, "spec": None, "instruction": None, "category": None, "truths": []}
    spec, instruction = chosen
    new_truths = []
    for t in job.truths:
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
    return {"index": job.index, "spec": spec, "instruction": instruction, "category": spec["verb"],
            "truths": new_truths}
