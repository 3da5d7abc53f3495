"""BabyAI agents of graded skill (``AGENTS``, one line each) and ``make_policy``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from autorater.data.worlds.babyai.bot import BotDriver, goto_object_instr
from autorater.data.worlds.babyai.levels import (
    DROP,
    FORWARD,
    LEFT,
    RIGHT,
    TOGGLE,
    build_instr,
    contains,
    front_cell,
    scene_objects,
    target_sets,
)

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


def random_action(env, rng: np.random.Generator) -> int:
    """A random action (never ``done``; toggling a box, which deletes it in minigrid, becomes forward)."""
    action = int(rng.choice(6, p=_RANDOM_P))
    if action == TOGGLE:
        front = front_cell(env)
        if front is not None and front.type == "box":
            action = FORWARD
    return action


def wander_action(env, rng: np.random.Generator) -> int:
    """A random walk step that moves around and touches nothing."""
    front = front_cell(env)
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
                objs = [o for o in scene_objects(self.env) if not contains(self.avoid, o)]
                if not objs or self.rng.random() < 0.3:
                    self.wander_left = int(self.rng.integers(3, 9))
                    continue
                target = objs[int(self.rng.integers(len(objs)))]
                self.driver = BotDriver(self.env, goto_object_instr(self.env, target))
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


class _DriveThenChores(Policy):
    """A bot driver plays toward a goal; once it has nothing left to do, chores (avoiding ``avoid``)."""

    def __init__(self, env, ctx, rng, avoid=()):
        super().__init__(env, ctx, rng)
        self.avoid = list(avoid)
        self.driver: BotDriver | None = None
        self.after: _Chores | None = None

    def drive(self) -> int:
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


class DistractorPolicy(_DriveThenChores):
    """Expert play toward another object with the same verb (``ctx.distractor_spec``), then chores
    that avoid the instruction's own objects."""

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng, avoid=[o for objs in target_sets(build_instr(ctx.spec, env)) for o in objs])

    def act(self) -> int:
        self.t += 1
        if self.driver is None and self.after is None:
            if self.ctx.distractor_spec is None:
                self.after = _Chores(self.env, self.rng, avoid=self.avoid)
            else:
                self.driver = BotDriver(self.env, build_instr(self.ctx.distractor_spec, self.env))
        return self.drive()


class RandomPolicy(Policy):
    def act(self) -> int:
        self.t += 1
        return random_action(self.env, self.rng)


class DithererPolicy(_DriveThenChores):
    """Wanders first, then plays like the expert (a fresh bot from where it stands), then chores."""

    def __init__(self, env, ctx, rng):
        super().__init__(env, ctx, rng)
        self.wander_steps = int(round(rng.uniform(0.25, 0.55) * ctx.horizon))
        self.instr = build_instr(ctx.spec, env)  # at the first frame: location words refer to it

    def act(self) -> int:
        self.t += 1
        if self.t <= self.wander_steps:
            return wander_action(self.env, self.rng)
        if self.driver is None and self.after is None:
            self.driver = BotDriver(self.env, self.instr)
        return self.drive()

    def observe(self, action: int) -> None:
        if self.after is None and self.driver is None and action == DROP:  # still wandering
            self.instr.update_objs_poss()
        super().observe(action)


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
