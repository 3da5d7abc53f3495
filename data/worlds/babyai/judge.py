"""BabyAI ground truth: the first event after the start of the episode decides the outcome.

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

from dataclasses import dataclass, field

from autorater.data.worlds.babyai.bot import BotDriver
from autorater.data.worlds.babyai.levels import (
    DROP,
    PICKUP,
    TOGGLE,
    build_instr,
    contains,
    front_cell,
    make_env,
    target_sets,
)


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
        move, fixed = target_sets(self.instr)
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
        self._pre_front = front_cell(env)
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
        move, fixed = target_sets(self.instr)
        if verb in ("pick_up", "put_next") and action == PICKUP and self._pre_carrying is None \
                and env.carrying is not None and not contains(move, env.carrying) and not endorsed:
            return "wrong_object"
        if verb == "put_next" and action == DROP and self._pre_carrying is not None and env.carrying is None \
                and contains(move, self._pre_carrying) and not endorsed:
            x, y = self._pre_carrying.cur_pos
            near = [env.grid.get(x + dx, y + dy) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
            if any(c is not None and c.type != "wall" for c in near):
                return "wrong_placement"
        if verb == "open" and action == TOGGLE and self._pre_front is not None \
                and self._pre_front.type == "door" and not self._pre_front_open and self._pre_front.is_open \
                and not contains(move, self._pre_front) and not endorsed:
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
        move, fixed = target_sets(self.instr)
        front = front_cell(env)
        if verb == "put_next":
            return env.carrying is not None and contains(move, env.carrying)
        if verb in ("pick_up", "open"):
            return front is not None and contains(move, front)
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
