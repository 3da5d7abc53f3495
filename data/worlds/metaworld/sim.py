"""Meta-World simulation for synthetic suites: environments, frames, agents and the simulator's truth.

Deterministic for a task, a reset vector and an action list: MuJoCo resets its data at every reset, and
every random draw here comes from a generator passed in. Environments are made once per process and
task and reused (``environment``); renderers draw without shadows, reflections or multisampling, which
makes a 128 px frame about six times cheaper under OSMesa and keeps every object visible.

Truth (``Judge``): the first of these after the takeover decides the outcome:
- success: Meta-World's ``info["success"]``;
- ``knocked_off``: an object fell off the table (6 cm below where it started, or below the table top);
- ``dropped`` (tasks that carry an object): the object was lifted 5 cm, then fell back within 2 cm of where
  it started while the gripper was over 8 cm away;
- otherwise ``timeout``, at the last frame.
"""

from __future__ import annotations

import atexit
import os
import warnings
from dataclasses import dataclass

import numpy as np

from autorater.data.worlds.metaworld.tasks import TASKS

__all__ = ["environment", "reset", "render", "make_agent", "Judge", "Outcome", "expert_policy", "expert_action",
           "ensure_gl", "judge_other_task", "OBJECT_SLOTS", "GOAL_SLOT"]

_GL_HELP = ("Meta-World renders through MuJoCo without a display: install OSMesa (Debian/Ubuntu: "
            "`apt-get install libosmesa6`) and keep MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa (set by default)")
_ENVS: dict[tuple, object] = {}
OBJECT_SLOTS = (slice(4, 7), slice(11, 14))  # object positions in the 39-d observation
GOAL_SLOT = slice(36, 39)
NEAR_MISS_CM = (2.0, 8.0)  # how far off the near-miss agent aims
PAUSE_SHARE = (0.5, 2.1)  # the pause agent's pauses, as a share of the time the expert has to spare
RELEASE_SHARE = (0.35, 1.15)  # when the early-release agent lets go, as a share of the expert's time to success
DETOUR_SHARE = (0.25, 0.9)  # how long the detour agent aims off, as a share of the continuation
GOAL_IS_HAND = ("reach-v3", "reach-wall-v3")  # undone by taking the hand back
GOAL_BACK = ("push-v3", "pick-place-v3", "push-wall-v3", "pick-place-wall-v3")  # undone by aiming back
UNDONE_STEPS = 16  # the success-then-undo agent rests once its success has been undone this long
SHARED_UNDO = {  # task -> (the opposite task of its scene, how the hand gets to where that task's expert starts)
    "drawer-open-v3": ("drawer-close-v3", "lift"), "drawer-close-v3": ("drawer-open-v3", "lift"),
    "door-open-v3": ("door-close-v3", "lift"), "faucet-open-v3": ("faucet-close-v3", "lift"),
    "faucet-close-v3": ("faucet-open-v3", "lift"), "window-open-v3": ("window-close-v3", "around"),
    "window-close-v3": ("window-open-v3", "around")}


def ensure_gl() -> None:
    """Headless OpenGL through OSMesa unless the caller chose a back-end."""
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")


def environment(task: str, image_size: int = 128):
    """This process's environment for ``task`` (made once; goal observable, no step limit)."""
    key = (task, image_size)
    if key not in _ENVS:
        ensure_gl()
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS

        env = ALL_V3_ENVIRONMENTS[task](render_mode="rgb_array", camera_name="corner", width=image_size,
                                        height=image_size)
        env._partially_observable = False  # the goal is part of the observation, as the scripted policies need
        del env.sawyer_observation_space  # a cached bound computed for the hidden goal
        env._set_task_called = True
        env.max_path_length = 10**9
        env.model.vis.quality.offsamples = 0
        env.model.vis.quality.shadowsize = 0
        if not _ENVS:
            atexit.register(_close_all)  # free the GL contexts while the interpreter can still call into them
        _ENVS[key] = env
    return _ENVS[key]


def _close_all() -> None:
    while _ENVS:
        _ENVS.popitem()[1].close()


def reset(env, env_seed: int | None = None, rand_vec=None) -> np.ndarray:
    """Reset to a scene: drawn from ``env_seed`` (Meta-World's own sampler), or the recorded ``rand_vec``."""
    if rand_vec is None:
        env._freeze_rand_vec, env.seeded_rand_vec = False, True
        env.seed(int(env_seed))
    else:
        env._freeze_rand_vec = True
        env._last_rand_vec = np.asarray(rand_vec, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obs, _ = env.reset()
    env._freeze_rand_vec = True
    return obs


def render(env, camera) -> np.ndarray:
    """One upright (height, width, 3) uint8 frame from a named camera (a string) or a free camera
    (a ``CameraPose``; see ``cameras``)."""
    import mujoco

    renderer = env.mujoco_renderer
    free = not isinstance(camera, str)
    if free:
        renderer.camera_id = cam = -1
    else:
        cam = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cam < 0:
            raise ValueError(f"the scene has no camera {camera!r}")
        renderer.camera_id = cam
    try:
        viewer = renderer._get_viewer("rgb_array")
        viewer.make_context_current()  # each environment draws in its own GL context (another may be current)
        if free:  # a free camera reads its pose from the viewer, its field of view from the model
            viewer.cam.lookat[:] = camera.lookat
            viewer.cam.distance, viewer.cam.azimuth, viewer.cam.elevation = (camera.distance, camera.azimuth,
                                                                              camera.elevation)
            env.model.vis.global_.fovy = camera.fovy
        frame = renderer.render("rgb_array")
    except Exception as e:  # no OpenGL back-end
        raise RuntimeError(f"{_GL_HELP} ({type(e).__name__}: {e})") from e
    # gymnasium makes its viewer on the first render (no public hook before it): reflections go off there, once,
    # and that first frame is drawn again without them
    if viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION]:
        viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        frame = renderer.render("rgb_array")
    if free:
        return np.ascontiguousarray(frame)  # a free camera never rolls: upright
    up = env.model.cam_mat0[cam].reshape(3, 3)[:, 1]  # the image's up direction in the world
    return np.ascontiguousarray(frame[::-1, ::-1] if up[2] < 0 else frame)  # upside-down cameras turned upright


def expert_policy(task: str):
    """Meta-World's scripted policy for ``task``."""
    import metaworld.policies as policies

    name = "Sawyer" + "".join(w.capitalize() for w in task[:-3].split("-")) + "V3Policy"
    names = {"SawyerPegInsertSideV3Policy": "SawyerPegInsertionSideV3Policy"}
    return getattr(policies, names.get(name, name))()


def expert_action(policy, obs) -> np.ndarray:
    """The scripted policy's action for ``obs``, clipped to [-1, 1]."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.clip(policy.get_action(obs), -1.0, 1.0)


class Agent:
    """An agent: ``act(obs, step)`` returns the action (4 values in [-1, 1]) at control step ``step``."""

    def __init__(self, task: str, rng: np.random.Generator):
        self.expert, self.rng = expert_policy(task), rng

    def act(self, obs: np.ndarray, step: int) -> np.ndarray:
        return expert_action(self.expert, obs)

    def after(self, step: int, obs: np.ndarray, info: dict) -> None:
        """What the step's move led to (most agents do not look)."""


class Noisy(Agent):
    def __init__(self, task, rng, sd: float):
        super().__init__(task, rng)
        self.sd = sd

    def act(self, obs, step):
        return np.clip(super().act(obs, step) + self.rng.normal(0.0, self.sd, 4), -1.0, 1.0)


class WrongTarget(Agent):
    """The expert fed an observation whose objects and goal are moved 12-20 cm in one horizontal direction."""

    def __init__(self, task, rng):
        super().__init__(task, rng)
        angle, dist = rng.uniform(0, 2 * np.pi), rng.uniform(0.12, 0.20)
        self.offset = np.array([np.cos(angle) * dist, np.sin(angle) * dist, 0.0])

    def act(self, obs, step):
        shifted = obs.copy()
        for part in (*OBJECT_SLOTS, GOAL_SLOT):
            if np.any(shifted[part]):
                shifted[part] += self.offset
        return super().act(shifted, step)


class Random(Agent):
    def act(self, obs, step):
        return self.rng.uniform(-1.0, 1.0, 4)


class Sluggish(Agent):
    def __init__(self, task, rng):
        super().__init__(task, rng)
        self.scale = rng.uniform(0.15, 0.45)

    def act(self, obs, step):
        action = super().act(obs, step)
        action[:3] *= self.scale
        return action


class StopShort(Agent):
    """The expert until ``stop`` (40-85% of the way from the takeover to the expert's success), then small
    random moves on the spot with the gripper held."""

    def __init__(self, task, rng, takeover: int, expert_success: int):
        super().__init__(task, rng)
        self.stop = takeover + int(rng.uniform(0.4, 0.85) * (expert_success - takeover))
        self.grip = None

    def act(self, obs, step):
        if step < self.stop:
            action = super().act(obs, step)
            self.grip = action[3]
            return action
        grip = self.grip if self.grip is not None else -1.0
        return np.concatenate([np.clip(self.rng.normal(0.0, 0.08, 3), -1, 1), [grip]])


# ----------------------------------------------------------------------------------------------
# Agents whose motion does not give their outcome away (training agents; see ``AGENTS``)


def _hover(rng: np.random.Generator, grip: float, sd: float = 0.02) -> np.ndarray:
    """A small random move on the spot with the gripper held."""
    return np.concatenate([np.clip(rng.normal(0.0, sd, 3), -1, 1), [grip]])


class NearMiss(WrongTarget):
    """The expert fed an observation whose objects and goal are moved 2-8 cm in one horizontal direction:
    it looks right and sometimes succeeds (the success radius is 5-7 cm)."""

    def __init__(self, task, rng):
        Agent.__init__(self, task, rng)
        angle, dist = rng.uniform(0, 2 * np.pi), rng.uniform(*NEAR_MISS_CM) / 100
        self.offset = np.array([np.cos(angle) * dist, np.sin(angle) * dist, 0.0])


class Pause(Agent):
    """The expert with one or two pauses (hovering with the gripper held) before it would succeed, together
    50-210% of the time the expert has to spare: a late success or none, from the same smooth motion."""

    def __init__(self, task, rng, takeover: int, expert_success: int, horizon: int):
        super().__init__(task, rng)
        spare = max(takeover + horizon - expert_success, 1)
        total = int(rng.uniform(*PAUSE_SHARE) * spare)
        n = int(rng.integers(1, 3))
        at = rng.integers(0, max(expert_success - takeover, 1), size=n)  # expert steps done before each pause
        lengths = np.diff(np.concatenate([[0], np.sort(rng.integers(0, total + 1, size=n - 1)), [total]]))
        self.pauses: dict[int, int] = {}
        for a, length in zip(at.tolist(), lengths.tolist()):
            self.pauses[a] = self.pauses.get(a, 0) + length
        self.done, self.left, self.grip = 0, 0, -1.0

    def act(self, obs, step):
        if self.left == 0 and self.done in self.pauses:
            self.left = self.pauses.pop(self.done)
        if self.left > 0:
            self.left -= 1
            return _hover(self.rng, self.grip)
        action = super().act(obs, step)
        self.grip, self.done = action[3], self.done + 1
        return action


class Detour(WrongTarget):
    """The expert aimed 12-20 cm off (as ``wrong-target``) for the first 25-90% of the continuation, then at
    the right place: purposeful all along, a late success or none."""

    def __init__(self, task, rng, takeover: int, horizon: int):
        super().__init__(task, rng)
        self.switch = takeover + int(rng.uniform(*DETOUR_SHARE) * horizon)

    def act(self, obs, step):
        return super().act(obs, step) if step <= self.switch else Agent.act(self, obs, step)


class EarlyRelease(Agent):
    """The expert until 35-115% of its time to success, then it lets go (gripper open) and withdraws 12 cm
    up, as if done: before its success that is a failure unless the released object settles in place."""

    def __init__(self, task, rng, takeover: int, expert_success: int):
        super().__init__(task, rng)
        self.release = takeover + int(rng.uniform(*RELEASE_SHARE) * (expert_success - takeover))
        self.away = None

    def act(self, obs, step):
        if step < self.release:
            return super().act(obs, step)
        if self.away is None:
            self.away = obs[:3] + np.array([0.0, 0.0, 0.12])
        return np.concatenate([np.clip(10.0 * (self.away - obs[:3]), -1, 1), [-1.0]])


class Overshoot(Agent):
    """The expert's moves at 1-2x their size with momentum (each move keeps 85-95% of the last one):
    it swings past its targets and back."""

    def __init__(self, task, rng):
        super().__init__(task, rng)
        self.gain, self.keep = rng.uniform(1.0, 2.0), rng.uniform(0.85, 0.95)
        self.last = np.zeros(3)

    def act(self, obs, step):
        action = super().act(obs, step)
        action[:3] = np.clip(self.gain * action[:3] + self.keep * self.last, -1, 1)
        self.last = action[:3].copy()
        return action


class SuccessThenUndo(Agent):
    """The expert until its first success, then (after 0-24 steps) it undoes it, and rests once it has been
    undone for ``UNDONE_STEPS``: the hand (reach) or the object (push, pick-place) taken back to where it
    was at the takeover; in a scene shared with the opposite task (drawer, window, faucet, door), the hand
    goes up and round to the far side of the handle and that task's expert takes over; otherwise its own
    moves since the takeover played backwards. The outcome is still a success, marked at the first one."""

    def __init__(self, task, rng, takeover: int):
        super().__init__(task, rng)
        self.task, self.hold = task, int(rng.integers(0, 25))
        self.undo_from: int | None = None
        self.moves: list[np.ndarray] = []
        self.start: np.ndarray | None = None  # (hand xyz, object xyz) at the takeover
        sibling, self.approach = SHARED_UNDO.get(task, (None, None))
        self.other = expert_policy(sibling) if sibling else None
        self.waypoints: list[np.ndarray] | None = None
        self.broken = 0

    def after(self, step, obs, info):
        if self.undo_from is None and info.get("success"):
            self.undo_from = step + self.hold
        elif self.undo_from is not None and step > self.undo_from:
            self.broken = 0 if info.get("success") else self.broken + 1

    def act(self, obs, step):
        if self.start is None:
            self.start = np.stack([obs[:3], obs[OBJECT_SLOTS[0]]]).copy()
        if self.undo_from is None or step <= self.undo_from:
            action = super().act(obs, step)
            self.moves.append(action)
            return action
        if self.broken >= UNDONE_STEPS:
            return _hover(self.rng, -1.0)
        if self.other is not None:
            return self._other_task(obs)
        if self.task in GOAL_IS_HAND or self.task in GOAL_BACK:
            back = obs.copy()
            back[GOAL_SLOT] = self.start[0] if self.task in GOAL_IS_HAND else self.start[1]
            return super().act(back, step)
        k = step - self.undo_from
        if k <= len(self.moves):  # retrace: the moves since the takeover, backwards
            move = self.moves[-k]
            return np.concatenate([-move[:3], [move[3]]])
        return _hover(self.rng, self.moves[0][3] if self.moves else -1.0)

    def _other_task(self, obs: np.ndarray) -> np.ndarray:
        """The opposite task's expert, after the approach its scene needs (``SHARED_UNDO``)."""
        hand, handle = obs[:3], obs[OBJECT_SLOTS[0]]
        if self.waypoints is None:
            if self.approach == "lift":  # up 10 cm: the expert then comes down on the handle from above
                self.waypoints = [hand + np.array([0.0, 0.0, 0.1])]
            else:  # "around" a sliding window's handle: back off, across to the side it slid to, in again
                side = float(np.sign(handle[0] - self.start[1][0]) or 1.0)
                low = handle[2] - 0.08
                self.waypoints = [np.array([hand[0], handle[1] - 0.1, low]),
                                  np.array([handle[0] + 0.07 * side, handle[1] - 0.1, low]),
                                  np.array([handle[0] + 0.04 * side, handle[1] - 0.04, low])]
        while self.waypoints and np.linalg.norm(self.waypoints[0] - hand) < 0.02:
            self.waypoints.pop(0)
        if self.waypoints:
            return np.concatenate([np.clip(10.0 * (self.waypoints[0] - hand), -1, 1), [-1.0]])
        return expert_action(self.other, obs)


def make_agent(name: str, task: str, rng: np.random.Generator, takeover: int, expert_success: int,
               horizon: int = 200) -> Agent:
    """The agent called ``name`` (``autorater.data.worlds.metaworld.AGENTS``)."""
    if name == "expert":
        return Agent(task, rng)
    if name.startswith("noisy-"):
        return Noisy(task, rng, float(name.split("-", 1)[1]))
    makers = {"wrong-target": lambda: WrongTarget(task, rng), "random": lambda: Random(task, rng),
              "sluggish": lambda: Sluggish(task, rng),
              "stop-short": lambda: StopShort(task, rng, takeover, expert_success),
              "near-miss": lambda: NearMiss(task, rng),
              "pause": lambda: Pause(task, rng, takeover, expert_success, horizon),
              "detour": lambda: Detour(task, rng, takeover, horizon),
              "early-release": lambda: EarlyRelease(task, rng, takeover, expert_success),
              "overshoot": lambda: Overshoot(task, rng),
              "success-then-undo": lambda: SuccessThenUndo(task, rng, takeover)}
    return makers[name]()


@dataclass
class Outcome:
    outcome: str
    failure_mode: str | None
    event_step: int | None  # control steps from the start (the state after that many steps shows it)


class Judge:
    """The first event after the takeover (see the module docstring), fed every control step."""

    def __init__(self, task: str, obs0: np.ndarray, takeover_step: int):
        self.carries, self.takeover = TASKS[task].carries, takeover_step
        self.objects = [part for part in OBJECT_SLOTS if np.any(obs0[part])]
        self.start_z = [float(obs0[part][2]) for part in self.objects]
        self.lifted = [False] * len(self.objects)
        self.event: Outcome | None = None

    def after(self, step: int, obs: np.ndarray, info: dict) -> None:
        if self.event is not None:
            return
        if info.get("success"):
            self.event = Outcome("success", None, step)
            return
        hand = obs[:3]
        for i, part in enumerate(self.objects):
            pos, z0 = obs[part], self.start_z[i]
            if pos[2] < min(z0, 0.0) - 0.06:
                self.event = Outcome("failure", "knocked_off", step)
                return
            if self.carries:
                self.lifted[i] |= pos[2] > z0 + 0.05
                if self.lifted[i] and pos[2] < z0 + 0.02 and np.linalg.norm(hand - pos) > 0.08:
                    self.event = Outcome("failure", "dropped", step)
                    return

    def result(self) -> Outcome:
        return self.event or Outcome("failure", "timeout", None)


def judge_other_task(env, other, judge: "Judge", step: int, action: np.ndarray) -> None:
    """Feed ``judge`` (of the task of environment ``other``, same scene) the state ``env`` is in: the physics
    state is copied into ``other`` and judged by ``other``'s own success rule (``evaluate_state``)."""
    import mujoco

    for name in ("qpos", "qvel", "mocap_pos", "mocap_quat"):
        getattr(other.data, name)[:] = getattr(env.data, name)
    mujoco.mj_forward(other.model, other.data)
    obs = other._get_obs()
    _, info = other.evaluate_state(obs, action)
    judge.after(step, obs, info)
