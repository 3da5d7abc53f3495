"""BabyAI simulation for synthetic suites: levels, instructions, expert bots, agents, ground truth, frames.

Everything here works on a minigrid BabyAI environment (``env.unwrapped``) and is deterministic for a
given level, environment seed, instruction and action list: the same actions replayed from the same
seed give the same states, frames and ground truth. ``data.generate`` builds suites from it.

Pieces:

- ``LEVELS`` / ``resolve_level``: the BabyAI levels a suite may use (single-instruction levels only).
- Instruction *specs*: a JSON form of a BabyAI instruction, e.g.
  ``{"verb": "put_next", "object": {"type": "key", "color": "red", "loc": null},
  "fixed": {"type": "ball", "color": null, "loc": null}}``; ``verb`` is also the scenario category
  (``go_to``, ``pick_up``, ``put_next``, ``open``).
- ``BotDriver``: minigrid's expert ``BabyAIBot`` made robust to off-policy play (it replans from the
  action actually taken, and is rebuilt from the current state if it breaks).
- ``AGENTS`` / ``make_policy``: agents of graded skill (see ``AGENTS`` for one line each).
- ``Judge``: the simulator ground truth for one instruction, stepped along an episode (see below).
- ``render_frame``: one video frame of the current state (full top-down view or the agent's view).

Ground truth (``Judge``). The first event after the start of the episode decides the outcome:

- success: the step where the instruction's verifier (``verify_action``, never strict mode, the
  ``BABYAI_DONE_ACTIONS`` variant ignored) says ``success``;
- failure at the first evident irreversible mistake (failure modes):
  ``wrong_object``  (pick_up, put_next) picked up an object the instruction does not name as the one
  to take;
  ``wrong_placement`` (put_next) dropped the right object next to other objects but not next to the
  named one;
  ``wrong_door``    (open) opened a door the instruction does not name.
  A move is a mistake only if the expert bot, from that very state, would not have made it (a
  *shadow expert* fed the same actions): the expert's own moves of blocking objects are not mistakes;
- otherwise ``timeout``: a failure at the end of the video. ``go_to`` has no irreversible mistake:
  going to another object can be undone, so its failures are timeouts.

Marker convention: frame ``i`` is shown at ``i / fps``; frame 0 is the initial state and frame ``i``
the state after action ``i``. A success or mistake at action ``i`` is marked at ``i / fps``; a
timeout at the end of the video, ``num_frames / fps``.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# Action ids of minigrid's ``Actions`` enum (left, right, forward, pickup, drop, toggle, done).
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
ACTION_NAMES = ("left", "right", "forward", "pickup", "drop", "toggle", "done")

# Single-instruction BabyAI levels whose failure rules are defined here (short name -> gym id).
LEVELS: dict[str, str] = {
    "GoToRedBallGrey": "BabyAI-GoToRedBallGrey-v0",
    "GoToRedBall": "BabyAI-GoToRedBall-v0",
    "GoToLocal": "BabyAI-GoToLocal-v0",
    "GoTo": "BabyAI-GoTo-v0",
    "PickupDist": "BabyAI-PickupDist-v0",
    "PickupLoc": "BabyAI-PickupLoc-v0",
    "Pickup": "BabyAI-Pickup-v0",
    "PutNextLocal": "BabyAI-PutNextLocal-v0",
    "PutNextLocalS6N4": "BabyAI-PutNextLocalS6N4-v0",
    "OpenDoor": "BabyAI-OpenDoor-v0",
    "OpenDoorColor": "BabyAI-OpenDoorColor-v0",
    "OpenDoorLoc": "BabyAI-OpenDoorLoc-v0",
}
CATEGORIES = ("go_to", "pick_up", "put_next", "open")
FAILURE_MODES = {
    "wrong_object": "picked up an object the instruction does not name (pick_up, put_next)",
    "wrong_placement": "put the right object down next to other objects, not the named one (put_next)",
    "wrong_door": "opened a door the instruction does not name (open)",
    "timeout": "no success and no evident mistake before the end of the video",
}

_MAX_STEPS = 10**7  # the continuation length decides when an episode ends, never the level


def resolve_level(name: str) -> tuple[str, str]:
    """``(short name, gym id)`` of a level given either form; a ValueError lists the valid names."""
    if name in LEVELS:
        return name, LEVELS[name]
    for short, gym_id in LEVELS.items():
        if name == gym_id:
            return short, gym_id
    raise ValueError(f"unknown BabyAI level {name!r}; valid levels: "
                     + ", ".join(f"{s} ({g})" for s, g in LEVELS.items()))


def make_env(level: str, env_seed: int):
    """A fresh, reset BabyAI environment (unwrapped) that never ends by itself."""
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the BabyAI ids)

    _, gym_id = resolve_level(level)
    env = gym.make(gym_id, max_steps=_MAX_STEPS, disable_env_checker=True).unwrapped
    with contextlib.redirect_stdout(io.StringIO()):  # minigrid prints its rejection sampling
        env.reset(seed=int(env_seed))
    return env


# ----------------------------------------------------------------------------------------------
# Instructions


def _desc_to_dict(desc) -> dict:
    return {"type": desc.type, "color": desc.color, "loc": desc.loc}


def _dict_to_desc(d: dict):
    from minigrid.envs.babyai.core.verifier import ObjDesc

    return ObjDesc(d.get("type"), d.get("color"), d.get("loc"))


def instr_to_spec(instr) -> dict:
    """The JSON spec of a single BabyAI action instruction."""
    from minigrid.envs.babyai.core.verifier import GoToInstr, OpenInstr, PickupInstr, PutNextInstr

    if isinstance(instr, GoToInstr):
        return {"verb": "go_to", "object": _desc_to_dict(instr.desc)}
    if isinstance(instr, PickupInstr):
        return {"verb": "pick_up", "object": _desc_to_dict(instr.desc)}
    if isinstance(instr, OpenInstr):
        return {"verb": "open", "object": _desc_to_dict(instr.desc)}
    if isinstance(instr, PutNextInstr):
        return {"verb": "put_next", "object": _desc_to_dict(instr.desc_move),
                "fixed": _desc_to_dict(instr.desc_fixed)}
    raise ValueError(f"unsupported instruction {type(instr).__name__}: only single go to / pick up / "
                     f"open / put next instructions are supported (use a level from LEVELS)")


def build_instr(spec: dict, env):
    """A fresh verifier for ``spec``, bound to ``env`` in its current state.

    Location words ("on your left") are resolved against the agent's current pose, so build the
    instructions of an episode at its first frame, as BabyAI does.
    """
    from minigrid.envs.babyai.core.verifier import GoToInstr, OpenInstr, PickupInstr, PutNextInstr

    verb = spec["verb"]
    if verb == "go_to":
        instr = GoToInstr(_dict_to_desc(spec["object"]))
    elif verb == "pick_up":
        instr = PickupInstr(_dict_to_desc(spec["object"]), strict=False)
    elif verb == "open":
        instr = OpenInstr(_dict_to_desc(spec["object"]), strict=False)
    elif verb == "put_next":
        instr = PutNextInstr(_dict_to_desc(spec["object"]), _dict_to_desc(spec["fixed"]), strict=False)
    else:
        raise ValueError(f"unknown verb {verb!r} in instruction spec; expected one of {CATEGORIES}")
    instr.reset_verifier(env)
    return instr


def describe(spec: dict, env) -> str:
    """The instruction in words ("put the red key next to a ball"), at the env's current state."""
    return build_instr(spec, env).surface(env)


def _target_sets(instr) -> tuple[list, list]:
    """(objects the instruction acts on, objects it puts things next to)."""
    if hasattr(instr, "desc_move"):
        return list(instr.desc_move.obj_set), list(instr.desc_fixed.obj_set)
    return list(instr.desc.obj_set), []


def _contains(objs, obj) -> bool:
    return any(o is obj for o in objs)


def scene_objects(env, kinds=("key", "ball", "box", "door")) -> list:
    """Objects lying on the grid (not carried), in grid order."""
    return [c for c in env.grid.grid if c is not None and c.type in kinds]


def alternative_specs(env, spec: dict, other_verbs: bool = False) -> list[dict]:
    """Instructions about *other* objects in the scene, same verb (and other verbs if asked).

    None of them can be satisfied by acting on what ``spec`` names: their object sets are disjoint
    from ``spec``'s. Built at the env's current state (use the first frame). Deterministic order.
    """
    instr = build_instr(spec, env)
    move, fixed = _target_sets(instr)
    verb = spec["verb"]
    out: list[dict] = []
    seen: set[str] = set()

    def add(new: dict) -> None:
        key = repr(sorted((k, repr(v)) for k, v in new.items()))
        if key in seen or new == spec:
            return
        try:
            alt = build_instr(new, env)
        except AssertionError:
            return
        a_move, a_fixed = _target_sets(alt)
        if not a_move or (new["verb"] == "put_next" and not a_fixed):
            return
        if new["verb"] == "put_next":
            if any(_contains(a_fixed, o) for o in a_move) or alt.objs_next():
                return  # the level's own rejection rules for put next
        seen.add(key)
        out.append(new)

    def plain(o) -> dict:
        return {"type": o.type, "color": o.color, "loc": None}

    objs = scene_objects(env)
    for o in objs:
        if _contains(move, o):
            continue
        d = plain(o)
        others = build_instr({"verb": "go_to", "object": d}, env).desc.obj_set
        if any(_contains(move, x) for x in others):
            continue  # the plain description would also name a target
        if verb in ("go_to", "pick_up") and o.type != "door":
            add({"verb": verb, "object": d})
        if verb == "open" and o.type == "door":
            add({"verb": "open", "object": d})
        if verb == "go_to" and o.type == "door":
            add({"verb": "go_to", "object": d})
        if verb == "put_next" and o.type != "door":
            add({"verb": "put_next", "object": d, "fixed": spec["fixed"]})
    if verb == "put_next":
        for o in objs:
            if _contains(fixed, o) or _contains(move, o):
                continue
            d = plain(o)
            named = build_instr({"verb": "go_to", "object": d}, env).desc.obj_set
            if any(_contains(fixed, x) for x in named):
                continue
            add({"verb": "put_next", "object": spec["object"], "fixed": d})
        # the same two objects, roles swapped
        if spec["fixed"].get("type") != "door":
            add({"verb": "put_next", "object": spec["fixed"], "fixed": spec["object"]})
    if other_verbs:
        target = spec["object"]
        if target.get("type") == "door":
            add({"verb": "go_to" if verb == "open" else "open", "object": target})
        elif verb == "go_to":
            add({"verb": "pick_up", "object": target})
        elif verb == "pick_up":
            add({"verb": "go_to", "object": target})
        elif verb == "put_next":
            add({"verb": "pick_up", "object": spec["fixed"]} if spec["fixed"].get("type") != "door"
                else {"verb": "open", "object": spec["fixed"]})
    return out


# ----------------------------------------------------------------------------------------------
# The expert bot, made robust


def _new_bot(env, instr):
    """A BabyAIBot for ``instr`` from the env's *current* state (it reads ``env.instrs`` once)."""
    from minigrid.envs.babyai.core.verifier import PutNextInstr
    from minigrid.utils.baby_ai_bot import BabyAIBot, DropSubgoal, GoNextToSubgoal

    saved = env.instrs
    env.instrs = instr
    try:
        bot = BabyAIBot(env)
    finally:
        env.instrs = saved
    carrying = env.carrying
    if carrying is not None:  # a fresh plan assumes empty hands
        if isinstance(instr, PutNextInstr) and _contains(instr.desc_move.obj_set, carrying):
            bot.stack = [DropSubgoal(bot), GoNextToSubgoal(bot, instr.desc_fixed, reason="PutNext")]
        else:
            bot._process_obs()
            drop_pos = bot._find_drop_pos()
            if drop_pos is not None:
                bot.stack += [DropSubgoal(bot), GoNextToSubgoal(bot, drop_pos)]
    return bot


class BotDriver:
    """The expert bot for one instruction, kept in step with an episode played by anyone.

    Call ``suggest()`` once before every step and ``observe(action)`` after it, whoever chose the
    action: the bot replans from the action actually taken. When the bot breaks on an off-policy
    state (its asserts), it is rebuilt from the current state. ``suggest`` returns None once the
    bot considers its mission complete (or cannot propose anything).
    """

    def __init__(self, env, instr):
        self.env, self.instr = env, instr
        self.bot = _new_bot(env, instr)
        self.finished = False
        self._taken: int | None = None
        self._suggested: int | None = None
        self._fresh = True

    def _rebuild(self) -> None:
        self.bot = _new_bot(self.env, self.instr)
        self._fresh = True

    def suggest(self) -> int | None:
        if self.finished:
            return None
        taken = self._taken
        arg = taken if (taken is not None and taken != self._suggested and not self._fresh) else None
        self._taken = None
        self._fresh = False
        try:
            action = int(self.bot.replan(arg))
        except Exception:  # noqa: BLE001  the bot asserts on states it did not plan for
            try:
                self._rebuild()
                self._fresh = False
                action = int(self.bot.replan())
            except Exception:  # noqa: BLE001
                action = None
        if action == DONE:
            self.finished = True
            action = None
        self._suggested = action
        return action

    def observe(self, action: int) -> None:
        self._taken = int(action)
        if action == DROP:
            self.instr.update_objs_poss()


def _goto_object_instr(env, obj):
    """A go-to verifier that tracks exactly ``obj``."""
    from minigrid.envs.babyai.core.verifier import GoToInstr, ObjDesc

    instr = GoToInstr(ObjDesc(obj.type, obj.color))
    instr.reset_verifier(env)
    instr.desc.obj_set = [obj]
    instr.desc.obj_poss = [tuple(obj.cur_pos)]
    return instr


# ----------------------------------------------------------------------------------------------
# Agents

AGENTS: dict[str, str] = {
    "expert": "the BabyAI expert bot: solves the task, then keeps doing chores (goes to other objects)",
    "noisy-0.2": "the expert bot, but a random action 20% of the time (the bot replans from it)",
    "noisy-0.5": "the expert bot, but a random action 50% of the time (the bot replans from it)",
    "distractor": "expert play on the same verb with a different object: skilled-looking, wrong target",
    "random": "random actions: 40% forward, 20% each turn, 7% pickup, 6% drop, 7% toggle (never opens boxes)",
    "ditherer": "wanders for 25-55% of the continuation, then solves the task expertly (late, messy)",
    "quitter": "visible expert progress for 30-80% of the way, then gives up and wanders",
}
_RANDOM_P = np.array([0.2, 0.2, 0.4, 0.07, 0.06, 0.07])  # left right forward pickup drop toggle


def _front(env):
    return env.grid.get(*env.front_pos)


def random_action(env, rng: np.random.Generator) -> int:
    """A random action (never ``done``; toggling a box, which deletes it in minigrid, becomes forward)."""
    action = int(rng.choice(6, p=_RANDOM_P))
    if action == TOGGLE:
        front = _front(env)
        if front is not None and front.type == "box":
            action = FORWARD
    return action


def wander_action(env, rng: np.random.Generator) -> int:
    """A random walk step that moves around and touches nothing."""
    front = _front(env)
    free = front is None or (front.type == "door" and front.is_open)
    if free and rng.random() < 0.65:
        return FORWARD
    return LEFT if rng.random() < 0.5 else RIGHT


@dataclass
class AgentContext:
    """What a policy knows about its scenario."""

    spec: dict  # the instruction
    horizon: int  # continuation steps
    expert_remaining: int  # expert steps from the takeover to success
    distractor_spec: dict | None = None  # another instruction, same verb (for ``distractor``)


class Policy:
    """An agent. Built at the first frame; ``sync()`` before each context step (the expert plays the
    context), ``act()`` for each continuation step, ``observe(action)`` after every step."""

    def __init__(self, env, ctx: AgentContext, rng: np.random.Generator):
        self.env, self.ctx, self.rng = env, ctx, rng
        self.t = 0  # continuation steps taken

    def sync(self) -> None:
        pass

    def act(self) -> int:
        raise NotImplementedError

    def observe(self, action: int) -> None:
        pass


class _Chores:
    """What skilled agents do once their mission is over: go to objects one after another, with
    short wanders in between. Never picks up, drops or toggles on purpose."""

    def __init__(self, env, rng, avoid=(), noise: float = 0.0):
        self.env, self.rng, self.avoid, self.noise = env, rng, list(avoid), noise
        self.driver: BotDriver | None = None
        self.wander_left = 0

    def act(self) -> int:
        for _ in range(4):
            if self.wander_left > 0:
                self.wander_left -= 1
                return wander_action(self.env, self.rng)
            if self.driver is None:
                objs = [o for o in scene_objects(self.env) if not _contains(self.avoid, o)]
                if not objs or self.rng.random() < 0.3:
                    self.wander_left = int(self.rng.integers(3, 9))
                    continue
                target = objs[int(self.rng.integers(len(objs)))]
                self.driver = BotDriver(self.env, _goto_object_instr(self.env, target))
            action = self.driver.suggest()
            if action is None:
                self.driver = None
                continue
            if self.noise and self.rng.random() < self.noise:
                return random_action(self.env, self.rng)
            return action
        return wander_action(self.env, self.rng)

    def observe(self, action: int) -> None:
        if self.driver is not None:
            self.driver.observe(action)


class _BotPolicy(Policy):
    """Expert play (optionally noisy) on an instruction, then chores."""

    noise = 0.0

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng)
        self.driver = BotDriver(env, build_instr(ctx.spec, env))
        self.after: _Chores | None = None

    def sync(self) -> None:
        self.driver.suggest()

    def _chores(self) -> _Chores:
        return _Chores(self.env, self.rng, noise=self.noise)

    def act(self) -> int:
        self.t += 1
        if self.after is None:
            action = self.driver.suggest()
            if action is None:
                self.after = self._chores()
        if self.after is not None:
            return self.after.act()
        if self.noise and self.rng.random() < self.noise:
            return random_action(self.env, self.rng)
        return action

    def observe(self, action: int) -> None:
        (self.after or self.driver).observe(action)


class ExpertPolicy(_BotPolicy):
    pass


class NoisyPolicy(_BotPolicy):
    def __init__(self, env, ctx, rng, noise: float):
        self.noise = noise
        super().__init__(env, ctx, rng)


class DistractorPolicy(Policy):
    """Expert play toward another object with the same verb (``ctx.distractor_spec``), then chores
    that avoid the instruction's own objects."""

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng)
        self.avoid = [o for objs in _target_sets(build_instr(ctx.spec, env)) for o in objs]
        self.driver: BotDriver | None = None
        self.after: _Chores | None = None

    def act(self) -> int:
        self.t += 1
        if self.driver is None and self.after is None:
            if self.ctx.distractor_spec is None:
                self.after = _Chores(self.env, self.rng, avoid=self.avoid)
            else:
                self.driver = BotDriver(self.env, build_instr(self.ctx.distractor_spec, self.env))
        if self.after is None:
            action = self.driver.suggest()
            if action is not None:
                return action
            self.after = _Chores(self.env, self.rng, avoid=self.avoid)
        return self.after.act()

    def observe(self, action: int) -> None:
        if self.after is not None:
            self.after.observe(action)
        elif self.driver is not None:
            self.driver.observe(action)


class RandomPolicy(Policy):
    def act(self) -> int:
        self.t += 1
        return random_action(self.env, self.rng)


class DithererPolicy(Policy):
    """Wanders first, then plays like the expert (a fresh bot from where it stands), then chores."""

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng)
        self.wander_steps = int(round(rng.uniform(0.25, 0.55) * ctx.horizon))
        self.instr = build_instr(ctx.spec, env)  # at the first frame: location words refer to it
        self.driver: BotDriver | None = None
        self.after: _Chores | None = None

    def act(self) -> int:
        self.t += 1
        if self.t <= self.wander_steps:
            return wander_action(self.env, self.rng)
        if self.after is None:
            if self.driver is None:
                self.driver = BotDriver(self.env, self.instr)
            action = self.driver.suggest()
            if action is not None:
                return action
            self.after = _Chores(self.env, self.rng)
        return self.after.act()

    def observe(self, action: int) -> None:
        if self.after is not None:
            self.after.observe(action)
        elif self.driver is not None:
            self.driver.observe(action)
        elif action == DROP:
            self.instr.update_objs_poss()


class QuitterPolicy(_BotPolicy):
    """Expert play for part of the remaining solution, then aimless wandering."""

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng)
        self.expert_steps = max(1, int(round(rng.uniform(0.3, 0.8) * ctx.expert_remaining)))

    def act(self) -> int:
        if self.t < self.expert_steps and self.after is None:
            return super().act()
        self.t += 1
        return wander_action(self.env, self.rng)

    def observe(self, action: int) -> None:
        if self.t <= self.expert_steps:
            super().observe(action)


_POLICIES: dict[str, Callable[..., Policy]] = {
    "expert": ExpertPolicy,
    "noisy-0.2": lambda env, ctx, rng: NoisyPolicy(env, ctx, rng, 0.2),
    "noisy-0.5": lambda env, ctx, rng: NoisyPolicy(env, ctx, rng, 0.5),
    "distractor": DistractorPolicy,
    "random": RandomPolicy,
    "ditherer": DithererPolicy,
    "quitter": QuitterPolicy,
}


def check_agents(agents) -> list[str]:
    """The agent names, checked; a ValueError lists the valid names."""
    agents = list(agents)
    bad = [a for a in agents if a not in _POLICIES]
    if bad or not agents:
        raise ValueError(f"unknown agent(s) {bad or agents!r}; valid agents: " + ", ".join(AGENTS))
    if len(set(agents)) != len(agents):
        raise ValueError(f"agents are listed twice: {agents}")
    return agents


def make_policy(name: str, env, ctx: AgentContext, rng: np.random.Generator) -> Policy:
    """Build agent ``name`` (a key of ``AGENTS``) on ``env`` at its first frame."""
    check_agents([name])
    return _POLICIES[name](env, ctx, rng)


# ----------------------------------------------------------------------------------------------
# Ground truth


@dataclass
class Truth:
    """The simulator's verdict on one episode (see the module docstring for the rules)."""

    outcome: str  # "success" | "failure"
    event_frame: int | None  # frame that first shows the success or the mistake; None for a timeout
    failure_mode: str | None  # None for a success
    num_frames: int
    fps: float
    traits: dict = field(default_factory=dict)

    @property
    def marker_s(self) -> float:
        frame = self.event_frame if self.event_frame is not None else self.num_frames
        return round(frame / self.fps, 6)


class Judge:
    """Ground truth for instruction ``spec``, stepped along an episode from its first frame.

    Call ``before()`` before each step and ``after(action)`` after it; ``result(...)`` at the end.
    A shadow expert (the bot for ``spec``, fed the same actions) says whether a move would have been
    the expert's own. Traits recorded for the simulated annotators: ``n_matching`` (objects the
    instruction could mean), ``has_location``, ``near_miss`` (+ its frame), ``off_expert_share`` (share
    of continuation steps before the event that differ from the shadow expert's move).
    """

    def __init__(self, env, spec: dict, takeover_step: int = 0):
        self.env, self.spec, self.takeover = env, spec, takeover_step
        self.instr = build_instr(spec, env)
        self.shadow = BotDriver(env, build_instr(spec, env))
        self.t = 0
        self.outcome: str | None = None
        self.event_step: int | None = None
        self.failure_mode: str | None = None
        self.near_miss_step: int | None = None
        self._off_expert = 0
        self._suggestion: int | None = None
        move, fixed = _target_sets(self.instr)
        descs = [self.instr.desc_move, self.instr.desc_fixed] if fixed else [self.instr.desc]
        self.traits = {"n_matching": len(move), "n_matching_fixed": len(fixed) if fixed else None,
                       "has_location": any(d.loc is not None for d in descs)}

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def before(self) -> None:
        if self.done:
            return
        env = self.env
        self._suggestion = self.shadow.suggest()
        self._pre_carrying = env.carrying
        self._pre_front = _front(env)
        self._pre_front_open = getattr(self._pre_front, "is_open", None)

    def after(self, action: int) -> None:
        self.t += 1
        if self.done:
            return
        self.shadow.observe(action)
        if self.t > self.takeover and action != self._suggestion:
            self._off_expert += 1
        if action == DROP:
            self.instr.update_objs_poss()
        if self.instr.verify_action(action) == "success":
            self._event("success", None)
            return
        mode = self._mistake(action)
        if mode is not None:
            self._event("failure", mode)
        elif self.near_miss_step is None and self.t > self.takeover and self._near_miss():
            self.near_miss_step = self.t

    def _event(self, outcome: str, mode: str | None) -> None:
        self.outcome, self.failure_mode, self.event_step = outcome, mode, self.t
        if mode is not None and self.near_miss_step is None and self._confusable(mode):
            self.near_miss_step = self.t

    def _mistake(self, action: int) -> str | None:
        env, verb, endorsed = self.env, self.spec["verb"], action == self._suggestion
        move, fixed = _target_sets(self.instr)
        if verb in ("pick_up", "put_next") and action == PICKUP and self._pre_carrying is None \
                and env.carrying is not None and not _contains(move, env.carrying) and not endorsed:
            return "wrong_object"
        if verb == "put_next" and action == DROP and self._pre_carrying is not None and env.carrying is None \
                and _contains(move, self._pre_carrying) and not endorsed:
            x, y = self._pre_carrying.cur_pos
            near = [env.grid.get(x + dx, y + dy) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
            if any(c is not None and c.type != "wall" for c in near):
                return "wrong_placement"
        if verb == "open" and action == TOGGLE and self._pre_front is not None \
                and self._pre_front.type == "door" and not self._pre_front_open and self._pre_front.is_open \
                and not _contains(move, self._pre_front) and not endorsed:
            return "wrong_door"
        return None

    def _confusable(self, mode: str) -> bool:
        """A mistake on an object that shares the named object's type or colour."""
        d = self.spec["object"]
        obj = self.env.carrying if mode == "wrong_object" else (
            self._pre_front if mode == "wrong_door" else self._pre_carrying)
        if mode == "wrong_placement":
            return True  # the right object, put down near the wrong one
        if mode == "wrong_door":
            return d.get("loc") is not None  # doors differ by colour; location words confuse
        return obj is not None and (obj.type == d.get("type") or (d.get("color") and obj.color == d["color"]))

    def _near_miss(self) -> bool:
        """The agent stands where one action would have done it (or carries the object to move)."""
        env, verb = self.env, self.spec["verb"]
        move, fixed = _target_sets(self.instr)
        front = _front(env)
        if verb == "put_next":
            return env.carrying is not None and _contains(move, env.carrying)
        if verb in ("pick_up", "open"):
            return front is not None and _contains(move, front)
        # go_to: next to a named object without facing it
        ax, ay = env.agent_pos
        return any(abs(int(px) - int(ax)) + abs(int(py) - int(ay)) == 1 for px, py in self.instr.desc.obj_poss)

    def result(self, num_frames: int, fps: float) -> Truth:
        steps = (self.event_step if self.done else self.t) - self.takeover
        traits = dict(self.traits)
        traits["near_miss"] = self.near_miss_step is not None
        traits["near_miss_frame"] = self.near_miss_step
        traits["off_expert_share"] = round(self._off_expert / steps, 4) if steps > 0 else 0.0
        if self.outcome is None:
            return Truth("failure", None, "timeout", num_frames, fps, traits)
        return Truth(self.outcome, self.event_step, self.failure_mode, num_frames, fps, traits)


def replay(level: str, env_seed: int, spec: dict, actions: list[int], takeover_step: int,
           fps: float) -> Truth:
    """Ground truth of a recorded episode against ``spec``: replay ``actions`` from the seed."""
    env = make_env(level, env_seed)
    judge = Judge(env, spec, takeover_step)
    for action in actions:
        judge.before()
        env.step(action)
        judge.after(action)
        if judge.done:
            break
    return judge.result(len(actions) + 1, fps)


def expert_solution(env, spec: dict, max_steps: int = 300) -> list[int] | None:
    """The expert bot's actions from the env's current state up to the verifier's success, or None."""
    judge = Judge(env, spec)
    actions: list[int] = []
    while len(actions) < max_steps:
        judge.before()
        action = judge._suggestion
        if action is None:
            return None
        env.step(action)
        judge.after(action)
        actions.append(action)
        if judge.done:
            return actions if judge.outcome == "success" else None
    return None


# ----------------------------------------------------------------------------------------------
# Frames


@dataclass(frozen=True)
class RenderConfig:
    view: str = "full"  # "full": the whole grid from above; "ego": the agent's partial view
    image_size: int = 128  # square frames, even
    tile_size: int | None = None  # pixels per cell; None fits the grid into image_size

    def __post_init__(self):
        if self.view not in ("full", "ego"):
            raise ValueError(f"view must be 'full' or 'ego', got {self.view!r}")
        if self.image_size < 16 or self.image_size % 2:
            raise ValueError(f"image_size must be an even number >= 16 (H.264), got {self.image_size}")
        if self.tile_size is not None and self.tile_size < 1:
            raise ValueError(f"tile_size must be >= 1 pixel, got {self.tile_size}")


def _render_grid(env, tile: int) -> np.ndarray:
    """The whole grid from above, no highlighting (minigrid's Grid.render, without its slow mask)."""
    from minigrid.core.grid import Grid

    grid = env.grid
    w, h = grid.width, grid.height
    img = np.zeros((h * tile, w * tile, 3), dtype=np.uint8)
    ax, ay = int(env.agent_pos[0]), int(env.agent_pos[1])
    cells = grid.grid
    for j in range(h):
        for i in range(w):
            agent_here = i == ax and j == ay
            img[j * tile:(j + 1) * tile, i * tile:(i + 1) * tile] = Grid.render_tile(
                cells[j * w + i], agent_dir=env.agent_dir if agent_here else None, highlight=False,
                tile_size=tile)
    return img


def _fit(img: np.ndarray, size: int) -> np.ndarray:
    """Shrink (area average) if larger than ``size``, then pad to ``size`` x ``size``, centred, black."""
    h, w = img.shape[:2]
    if h > size or w > size:
        from PIL import Image

        scale = size / max(h, w)
        nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
        img = np.asarray(Image.fromarray(img).resize((nw, nh), Image.Resampling.BOX))
        h, w = img.shape[:2]
    if (h, w) == (size, size):
        return img
    out = np.zeros((size, size, 3), dtype=np.uint8)
    top, left = (size - h) // 2, (size - w) // 2
    out[top:top + h, left:left + w] = img
    return out


def render_frame(env, config: RenderConfig) -> np.ndarray:
    """One RGB frame (image_size, image_size, 3) uint8 of the current state. The instruction is never
    drawn. The full view shows the whole grid; ``ego`` the agent's 7x7 view, agent at the bottom."""
    if config.view == "ego":
        cells = env.agent_view_size
        tile = config.tile_size or max(1, config.image_size // cells)
        return _fit(env.get_pov_render(tile), config.image_size)
    cells = max(env.grid.width, env.grid.height)
    tile = config.tile_size or max(1, config.image_size // cells)
    return _fit(_render_grid(env, tile), config.image_size)
