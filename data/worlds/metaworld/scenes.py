"""Meta-World scenarios: plan one, play its continuations, write their videos and truth; instruction swaps.

A *scenario* is (task, environment seed, wording, camera, takeover). Its seed is kept only if the scripted
expert succeeds within 190 control steps from the start; the expert then plays the context, 20-60% of
its own time to success in whole frames (at least one frame, always before its success), and each agent
acts alone for 200 control steps (2.5 s) from that same state. Every continuation of a scenario has the
same length whatever happens: ``1 + context frames + 20`` frames at 8 fps. The context's frames are
rendered once per scenario. A ``random`` camera is a free camera drawn per scenario (``cameras``; from its
own random stream, so named cameras are drawn as before) that keeps the hand, the objects and the goal in
view from the start to the expert's success; its pose is recorded.

Truth lines (``simulator_truth.jsonl``): ``continuation_id``, ``scenario_id``, ``agent``, ``task``,
``env_seed``, ``rand_vec`` (Meta-World's reset vector: object and goal positions), ``camera`` (a name, or
``random``: then ``camera_pose``, the drawn pose, is there too, as in the scenario's metadata),
``instruction``, ``category`` (the verb), ``outcome``, ``marker_s`` (the first frame that shows the
success or the failure, / fps; a timeout: the last frame), ``failure_mode`` (``timeout``,
``knocked_off``, ``dropped``; null on success), ``failure_modes`` (those possible on the task),
``event_frame`` (null for a timeout), ``event_step`` (control steps from the start), ``num_frames``,
``fps``, ``duration_s``, ``takeover_frame``, ``takeover_s``, ``steps_per_frame``, ``agent_rng`` (the key
of the agent's random generator, to replay it), ``expert_success_step``, and ``traits``:
``off_expert_share`` (share of steps before the event whose move differs from the expert's by over 0.5),
``near_miss`` / ``near_miss_frame`` (a failure that came within twice the expert's final distance of the
target, and when), ``n_matching`` (1) and ``has_location`` (false), and the derived ``messiness`` and
``ambiguity`` the annotators react to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autorater.data.annotators import trait_scores
from autorater.data.video import write_video
from autorater.data.worlds.base import ScenarioJob, SwapJob
from autorater.data.worlds.metaworld.cameras import (
    HOLD_OUT_DEGREES,
    RANDOM,
    CameraPose,
    Sightlines,
    arm_links,
    draw_pose,
    named_axis,
)
from autorater.data.worlds.metaworld.sim import (
    GOAL_SLOT,
    Judge,
    environment,
    expert_action,
    expert_policy,
    judge_other_task,
    make_agent,
    render,
    reset,
)
from autorater.data.worlds.metaworld.tasks import CROSS_SCENES, SHARED_SCENES, TASKS

__all__ = ["run_scenario", "swap_scenario", "plan_scenario", "paraphrases"]

MAX_EXPERT_STEPS = 190  # the expert must succeed by then (the agent's 200 steps leave it room)
CONTEXT_SHARE = (0.2, 0.6)  # of the expert's time to success
OFF_EXPERT = 0.5  # a move differs from the expert's when their xyz parts are this far apart


@dataclass
class Plan:
    index: int
    task: str
    env_seed: int
    rand_vec: list[float]
    instruction: str
    camera: str  # a named camera, or RANDOM (then camera_pose says where it is)
    takeover: int  # control steps of expert context
    expert_success: int  # the expert's success step (from the start)
    success_distance: float | None  # Meta-World's obj_to_target at the expert's success
    steps_per_frame: int
    horizon: int
    camera_pose: CameraPose | None = None
    twin_camera: str | None = None  # a second view of every rollout (``twin_camera``): a name, or RANDOM
    twin_pose: CameraPose | None = None  # the second view's drawn pose (its own random stream)

    @property
    def view(self):
        """What ``render`` takes: the camera's name, or the drawn pose."""
        return self.camera_pose if self.camera_pose is not None else self.camera

    @property
    def views(self) -> list:
        """Every view ``render`` draws each frame from: the scenario's camera, then its twin's when there is one."""
        twin = [] if self.twin_camera is None else [self.twin_pose if self.twin_pose is not None else self.twin_camera]
        return [self.view] + twin

    @property
    def scenario_id(self) -> str:
        return f"s{self.index:04d}"

    @property
    def takeover_frame(self) -> int:
        return self.takeover // self.steps_per_frame

    @property
    def num_frames(self) -> int:
        return 1 + (self.takeover + self.horizon) // self.steps_per_frame


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def plan_scenario(index: int, task: str, seed: int, options: dict) -> Plan:
    """Draw a scene where the expert succeeds in time, a wording, a camera and the takeover."""
    rng = _rng(seed, index, 0)
    env, spf = environment(task, options["image_size"]), options["steps_per_frame"]
    for _ in range(100):
        env_seed = int(rng.integers(0, 2**31 - 1))
        obs = reset(env, env_seed=env_seed)
        rand_vec = [float(v) for v in env._last_rand_vec]
        judge, expert, info = Judge(task, obs, 0), expert_policy(task), {}
        seen, arm = [_points(obs, judge)], [arm_links(env.model, env.data)]  # what a drawn camera must see
        for step in range(1, MAX_EXPERT_STEPS + 1):
            obs, _, _, _, info = env.step(expert_action(expert, obs))
            judge.after(step, obs, info)
            seen.append(_points(obs, judge))
            arm.append(arm_links(env.model, env.data))
            if judge.event is not None:
                break
        event = judge.result()
        if event.outcome != "success" or event.event_step < 2 * spf:
            continue
        success = event.event_step
        frames = min(max(int(round(rng.uniform(*CONTEXT_SHARE) * success / spf)), 1), (success - 1) // spf)
        wordings = TASKS[task].wordings
        instruction = wordings[int(rng.integers(len(wordings)))]
        camera = options["cameras"][int(rng.integers(len(options["cameras"])))]
        distance = info.get("obj_to_target")
        pose = None
        if camera == RANDOM:  # its own stream: the named-camera draws above are as they always were
            pose = _draw_camera(env, seed, index, options, rand_vec, seen, arm)
        twin, twin_pose = options.get("twin_camera") or None, None
        if twin == RANDOM:  # a stream of its own again: the first view is drawn as without a twin
            twin_pose = _draw_camera(env, seed, index, options, rand_vec, seen, arm, stream=3)
        return Plan(index, task, env_seed, rand_vec, instruction, camera, frames * spf, success,
                    None if distance is None else float(distance), spf, options["horizon_steps"], pose, twin,
                    twin_pose)
    raise RuntimeError(f"the expert never succeeded on {task} within {MAX_EXPERT_STEPS} steps in 100 scenes "
                       f"(scenario {index}); leave this task out with --tasks")


def _draw_camera(env, seed: int, index: int, options: dict, rand_vec: list[float], seen: list[np.ndarray],
                 arm: list[np.ndarray], stream: int = 2) -> CameraPose:
    """A free camera for the scene ``env`` is in at the expert's success (``seen``: the task's points at
    every step from the start; ``arm``: the arm's links), drawn from random stream ``stream`` of the scenario
    (2: its camera; 3: its twin's)."""
    import copy

    success = copy.copy(env.data)
    reset(env, rand_vec=rand_vec)
    sees = Sightlines(env.model, copy.copy(env.data), seen[0], success, seen[-1], np.stack(arm))
    held = [named_axis(env.model, c) for c in options.get("hold_out_cameras", ())]
    return draw_pose(_rng(seed, index, stream), np.concatenate(seen), held,
                     options.get("hold_out_degrees", HOLD_OUT_DEGREES), sees)


def _points(obs: np.ndarray, judge: Judge) -> np.ndarray:
    """(k, 3): the hand, the task's objects and the goal in one observation."""
    return np.stack([obs[:3], *(obs[part] for part in judge.objects), obs[GOAL_SLOT]])


def _play(plan: Plan, agent: str, rng: np.random.Generator, image_size: int, draw: bool,
          context_frames: list | None, observe=None) -> tuple[list, dict]:
    """Play one continuation from the start (context included); frames only when ``draw``, from every one of
    ``plan.views`` (a list of frames per view; ``context_frames`` likewise); ``observe(step, env, action)`` is
    called after every control step."""
    env, spf, views = environment(plan.task, image_size), plan.steps_per_frame, plan.views
    obs = reset(env, rand_vec=plan.rand_vec)
    judge, expert = Judge(plan.task, obs, plan.takeover), expert_policy(plan.task)
    own_context = draw and context_frames is None
    frames = [[render(env, view)] if own_context else [] for view in views]

    def draw_frame():
        for view, drawn in zip(views, frames):
            drawn.append(render(env, view))

    for step in range(1, plan.takeover + 1):
        action = expert_action(expert, obs)
        obs, _, _, _, info = env.step(action)
        judge.after(step, obs, info)
        if observe is not None:
            observe(step, env, action)
        if own_context and step % spf == 0:
            draw_frame()
    if judge.event is not None:
        raise RuntimeError(f"scenario {plan.scenario_id}: {judge.event.outcome} during the expert's context")
    if draw and context_frames is not None:
        frames = [list(context) for context in context_frames]
    player = make_agent(agent, plan.task, rng, plan.takeover, plan.expert_success, plan.horizon)
    off, before, best, best_step = 0, 0, math.inf, None
    for step in range(plan.takeover + 1, plan.takeover + plan.horizon + 1):
        action = np.clip(np.asarray(player.act(obs, step), dtype=np.float64), -1.0, 1.0)
        if judge.event is None:
            before += 1
            off += float(np.linalg.norm(action[:3] - expert_action(expert, obs)[:3])) > OFF_EXPERT
        obs, _, _, _, info = env.step(action)
        judge.after(step, obs, info)
        player.after(step, obs, info)
        if observe is not None:
            observe(step, env, action)
        distance = info.get("obj_to_target")
        if judge.event is None and distance is not None and distance < best:
            best, best_step = float(distance), step
        if draw and step % spf == 0:
            draw_frame()
    event = judge.result()
    near = (event.outcome == "failure" and best_step is not None and plan.success_distance is not None
            and best <= 2 * plan.success_distance + 0.01)
    stats = {"event": event, "off_expert_share": off / max(before, 1), "near_miss": bool(near),
             "near_miss_frame": math.ceil(best_step / spf) if near else None}
    return frames, stats


def _truth_record(cid: str, plan: Plan, agent: str, stats: dict, fps: float, agent_rng: list[int]) -> dict:
    event, spf = stats["event"], plan.steps_per_frame
    event_frame = None if event.event_step is None else math.ceil(event.event_step / spf)
    marker_frame = plan.num_frames - 1 if event_frame is None else event_frame
    traits = {"off_expert_share": round(stats["off_expert_share"], 4), "near_miss": stats["near_miss"],
              "near_miss_frame": stats["near_miss_frame"], "n_matching": 1, "has_location": False}
    traits["messiness"], traits["ambiguity"] = trait_scores(event.outcome, traits, plan.takeover_frame, event_frame,
                                                            plan.num_frames)
    task = TASKS[plan.task]
    modes = (["dropped"] if task.carries else []) + ["knocked_off", "timeout"]  # evident ones first, as BabyAI's
    return {"continuation_id": cid, "scenario_id": plan.scenario_id, "agent": agent, "task": plan.task,
            "env_seed": plan.env_seed, "rand_vec": plan.rand_vec, "camera": plan.camera,
            "instruction": plan.instruction, "category": task.verb, "outcome": event.outcome,
            "marker_s": round(marker_frame / fps, 6), "failure_mode": event.failure_mode, "failure_modes": modes,
            "event_frame": event_frame, "event_step": event.event_step, "num_frames": plan.num_frames, "fps": fps,
            "duration_s": round(plan.num_frames / fps, 6), "takeover_frame": plan.takeover_frame,
            "takeover_s": round(plan.takeover_frame / fps, 6), "steps_per_frame": spf, "agent_rng": agent_rng,
            "expert_success_step": plan.expert_success, "traits": traits, **_pose_field(plan)}


def paraphrases(task: str, instruction: str) -> list[str]:
    """The task's other wordings (scenario metadata ``paraphrases``): each describes the same success as
    ``instruction``, so training may word a clip with any of them and never uses one as a negative."""
    return [w for w in TASKS[task].wordings if w != instruction]


def twin_id(continuation_id: str) -> str:
    """The id of a continuation's second view (``c000012`` -> ``c000012-twin``)."""
    return f"{continuation_id}-twin"


def _view_fields(plan: Plan, twin: bool) -> dict:
    """The camera of one view of a rollout: ``camera`` (a name or RANDOM) and, drawn, ``camera_pose``."""
    camera, pose = (plan.twin_camera, plan.twin_pose) if twin else (plan.camera, plan.camera_pose)
    return {"camera": camera, **({} if pose is None else {"camera_pose": pose.to_dict()})}


def _pose_field(plan: Plan) -> dict:
    """``{"camera_pose": ...}`` for a drawn camera; nothing for a named one (whose records stay as they were)."""
    return {} if plan.camera_pose is None else {"camera_pose": plan.camera_pose.to_dict()}


def run_scenario(job: ScenarioJob) -> dict:
    """Plan one scenario and record its continuations (videos written unless ``job.out`` is None)."""
    plan = plan_scenario(job.index, job.task, job.seed, job.options)
    draw = job.out is not None
    context_frames = None
    continuations, truths = [], []
    for k, agent in enumerate(job.agents):
        cid = f"c{job.first_continuation + k:06d}"
        key = [job.seed, job.index, 1, k]
        frames, stats = _play(plan, agent, _rng(*key), job.options["image_size"], draw, context_frames)
        ids = [cid] + ([twin_id(cid)] if plan.twin_camera else [])  # one continuation per view of the rollout
        if draw:
            context_frames = [view[:plan.takeover_frame + 1] for view in frames]
            for view_id, view in zip(ids, frames):
                write_video(Path(job.out) / "videos" / f"{view_id}.mp4", np.stack(view), fps=job.fps)
        truth = _truth_record(cid, plan, agent, stats, job.fps, key)
        for view_id, twin in zip(ids, ids[::-1]):
            record = {"continuation_id": view_id, "scenario_id": plan.scenario_id, "agent_id": agent,
                      "video": f"videos/{view_id}.mp4"}
            if plan.twin_camera:
                record["metadata"] = {"twin": twin, **_view_fields(plan, view_id != cid)}
            continuations.append(record)
            truths.append(truth if not plan.twin_camera else
                          {**truth, "continuation_id": view_id, "twin": twin, **_view_fields(plan, view_id != cid)})
    scenario = {"scenario_id": plan.scenario_id, "instruction": plan.instruction, "category": TASKS[plan.task].verb,
                "tags": [plan.task, job.version, f"camera:{plan.camera}"],
                "takeover_s": round(plan.takeover_frame / job.fps, 6),
                "metadata": {"world": "metaworld", "task": plan.task, "env_seed": plan.env_seed,
                             "rand_vec": plan.rand_vec, "camera": plan.camera, "context_steps": plan.takeover,
                             "continuation_steps": plan.horizon, "steps_per_frame": plan.steps_per_frame,
                             "num_frames": plan.num_frames, "expert_success_step": plan.expert_success,
                             "success_distance": plan.success_distance, **_pose_field(plan),
                             "paraphrases": paraphrases(plan.task, plan.instruction),
                             **({"twin_camera": plan.twin_camera} if plan.twin_camera else {})}}
    return {"index": job.index, "scenario": scenario, "continuations": continuations, "truths": truths}


# ----------------------------------------------------------------------------------------------
# Instruction swaps


def _plan_of(scenario: dict) -> Plan:
    """The plan a scenario record was generated from (its metadata holds it)."""
    meta = scenario["metadata"]
    index = int(scenario["scenario_id"][1:])
    pose = meta.get("camera_pose")
    return Plan(index, meta["task"], meta["env_seed"], meta["rand_vec"], scenario["instruction"], meta["camera"],
                meta["context_steps"], meta["expert_success_step"], meta.get("success_distance"),
                meta["steps_per_frame"], meta["continuation_steps"],
                None if pose is None else CameraPose.from_dict(pose))


def _other_task_outcomes(plan: Plan, truths: list[dict], other: str) -> list | None:
    """Each continuation judged by ``other``'s success rule (same scene), by replaying it in the simulator;
    None when the replayed context already decides the other task."""
    env_other = environment(other, 64)
    outcomes = []
    for t in truths:
        judge = Judge(other, reset(env_other, rand_vec=plan.rand_vec), plan.takeover)

        def observe(step, env, action, judge=judge):
            judge_other_task(env, env_other, judge, step, action)

        _play(plan, t["agent"], _rng(*t["agent_rng"]), 64, False, None, observe=observe)
        event = judge.result()
        if event.event_step is not None and event.event_step <= plan.takeover:
            return None
        outcomes.append(event)
    return outcomes


def _swapped(t: dict, instruction: str, spec: dict, category: str, outcome: str, mode: str | None,
             event_step: int | None) -> dict:
    spf = t["steps_per_frame"]
    event_frame = None if event_step is None else math.ceil(event_step / spf)
    marker_frame = t["num_frames"] - 1 if event_frame is None else event_frame
    traits = {**t["traits"], "near_miss": False, "near_miss_frame": None}
    traits["messiness"], traits["ambiguity"] = trait_scores(outcome, traits, t["takeover_frame"], event_frame,
                                                            t["num_frames"])
    return {**t, "instruction": instruction, "instruction_spec": spec, "category": category, "outcome": outcome,
            "failure_mode": mode, "event_frame": event_frame, "event_step": event_step,
            "marker_s": round(marker_frame / t["fps"], 6), "traits": traits,
            "original_instruction": t["instruction"], "original_outcome": t["outcome"]}


def swap_scenario(job: SwapJob) -> dict:
    """Another instruction for one scenario, and the truth of every continuation under it:

    - where the scene is shared with another task (``SHARED_SCENES``, and ``CROSS_SCENES`` with
      ``job.options["cross_task"]``; about half of those scenarios), that task's wording, judged by the
      simulator with that task's own success rule on the replayed continuation (left out when the replayed
      context already decides it);
    - otherwise an instruction about an object the scene does not show (another task's wording): nothing
      the agent does can satisfy it, so every continuation is a failure (``timeout``, at the last frame);
      with ``job.options["shared_only"]`` none: only the judged swaps of shared scenes, which can succeed.

    No swap uses the words of a task in ``job.options["keep_out"]`` (a training suite's held-out tasks).
    """
    meta = job.scenario["metadata"]
    here = TASKS[meta["task"]]
    rng = _rng(job.seed, job.index, 0x5A9)
    none = {"index": job.index, "spec": None, "instruction": None, "category": None, "truths": []}
    if not job.truths:
        return none
    siblings = list(SHARED_SCENES.get(meta["task"], ()))
    if job.options.get("cross_task"):
        siblings += CROSS_SCENES.get(meta["task"], ())
    kept_out = set(job.options.get("keep_out") or ())  # held-out tasks: their words stay out of this suite
    siblings = [t for t in siblings if t not in kept_out]
    shared_only = bool(job.options.get("shared_only"))
    if siblings and (shared_only or rng.random() < 0.5):
        other = siblings[int(rng.integers(len(siblings)))]
        task = TASKS[other]
        instruction = task.wordings[int(rng.integers(len(task.wordings)))]
        outcomes = _other_task_outcomes(_plan_of(job.scenario), job.truths, other)
        if outcomes is not None:
            spec = {"task": other, "kind": "shared_scene", "object": task.target}
            truths = [_swapped(t, instruction, spec, task.verb, o.outcome, o.failure_mode, o.event_step)
                      for t, o in zip(job.truths, outcomes)]
            return {"index": job.index, "spec": spec, "instruction": instruction, "category": task.verb,
                    "truths": truths, "paraphrases": paraphrases(other, instruction)}
    absent = [name for name, t in TASKS.items() if t.target not in here.objects and here.target not in t.objects
              and name not in kept_out]
    if not absent or shared_only:
        return none
    other = absent[int(rng.integers(len(absent)))]
    task = TASKS[other]
    instruction = task.wordings[int(rng.integers(len(task.wordings)))]
    spec = {"task": other, "kind": "absent_object", "object": task.target}
    truths = [_swapped(t, instruction, spec, task.verb, "failure", "timeout", None) for t in job.truths]
    return {"index": job.index, "spec": spec, "instruction": instruction, "category": task.verb, "truths": truths,
            "paraphrases": paraphrases(other, instruction)}
