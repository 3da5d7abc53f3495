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

from data.worlds.metaworld.tasks import TASKS

__all__ = ["environment", "reset", "render", "make_agent", "Judge", "Outcome", "expert_policy", "expert_action",
           "ensure_gl", "judge_other_task"]

_GL_HELP = ("Meta-World renders through MuJoCo without a display: install OSMesa (Debian/Ubuntu: "
            "`apt-get install libosmesa6`) and keep MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa (set by default)")
_ENVS: dict[tuple, object] = {}
OBJECT_SLOTS = (slice(4, 7), slice(11, 14))  # object positions in the 39-d observation
GOAL_SLOT = slice(36, 39)


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


def render(env, camera: str) -> np.ndarray:
    """One upright (height, width, 3) uint8 frame from a named camera."""
    import mujoco

    renderer = env.mujoco_renderer
    cam = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam < 0:
        raise ValueError(f"the scene has no camera {camera!r}")
    renderer.camera_id = cam
    try:
        viewer = renderer._get_viewer("rgb_array")
        viewer.make_context_current()  # each environment draws in its own GL context (another may be current)
        frame = renderer.render("rgb_array")
    except Exception as e:  # no OpenGL back-end
        raise RuntimeError(f"{_GL_HELP} ({type(e).__name__}: {e})") from e
    # gymnasium makes its viewer on the first render (no public hook before it): reflections go off there, once,
    # and that first frame is drawn again without them
    if viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION]:
        viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        frame = renderer.render("rgb_array")
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


def make_agent(name: str, task: str, rng: np.random.Generator, takeover: int, expert_success: int) -> Agent:
    """The agent called ``name`` (``data.worlds.metaworld.AGENTS``)."""
    if name == "expert":
        return Agent(task, rng)
    if name.startswith("noisy-"):
        return Noisy(task, rng, float(name.split("-", 1)[1]))
    makers = {"wrong-target": lambda: WrongTarget(task, rng), "random": lambda: Random(task, rng),
              "sluggish": lambda: Sluggish(task, rng),
              "stop-short": lambda: StopShort(task, rng, takeover, expert_success)}
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
