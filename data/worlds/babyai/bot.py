"""The BabyAI expert bot (minigrid's ``BabyAIBot``) made robust to off-policy play: it replans from the
action actually taken, and is rebuilt from the current state if it breaks or plans without end.

minigrid's ``replan`` loops over its stack of subgoals until one proposes an action, and some states reached off
policy never yield one: carrying an object in front of a blocker, the bot stacks eight more subgoals every turn
of the loop (``suite generate --world babyai --scenarios 40 --continuations-per-scenario 10 --seed 7``, scenario
30, the distractor agent's chores: 2 GB after 30 minutes, never ending). Every replanning has a budget,
``MAX_PLAN_STEPS`` looks at the top of the stack (each subgoal considered once per look; in 144,000 replannings of
12 seeds of every level and agent at most 8 were used); a replanning that spends it counts as a broken bot, which
``BotDriver`` rebuilds once and then gives up for that step (``suggest`` returns None: the agent moves on). So a
step costs at most a few budgets, and a scenario at most its fixed number of steps times that (scenario 30 above:
6 budgets spent, 2.7 s for its 10 continuations). Every suite whose bots never spent it is unchanged, byte for
byte (7 suites compared, 534 videos' frames).
"""

from __future__ import annotations

from autorater.data.worlds.babyai.levels import DONE, DROP, contains

MAX_PLAN_STEPS = 100  # subgoals one replanning may consider (normal play needs at most 8)


class PlanBudgetSpent(RuntimeError):
    """A replanning of the bot considered ``MAX_PLAN_STEPS`` subgoals without proposing an action."""


class _PlanStack(list):
    """The bot's stack of subgoals, counting the looks at its top (minigrid's ``replan`` looks once per subgoal it
    considers): past ``left`` looks it raises :class:`PlanBudgetSpent` instead of planning on."""

    def __init__(self, items=()):
        super().__init__(items)
        self.left = MAX_PLAN_STEPS

    def __getitem__(self, index):
        self.left -= 1
        if self.left < 0:
            raise PlanBudgetSpent(f"the bot considered {MAX_PLAN_STEPS} subgoals without proposing an action")
        return super().__getitem__(index)


def replan_within_budget(bot, action_taken=None) -> int:
    """``bot.replan(action_taken)`` within a budget of ``MAX_PLAN_STEPS`` subgoals (PlanBudgetSpent past it)."""
    if not isinstance(bot.stack, _PlanStack):
        bot.stack = _PlanStack(bot.stack)
    bot.stack.left = MAX_PLAN_STEPS
    return int(bot.replan(action_taken))


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
        if isinstance(instr, PutNextInstr) and contains(instr.desc_move.obj_set, carrying):
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
            action = replan_within_budget(self.bot, arg)
        except Exception:  # noqa: BLE001  the bot asserts on states it did not plan for, or spent its budget
            try:
                self._rebuild()
                self._fresh = False
                action = replan_within_budget(self.bot)
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


def goto_object_instr(env, obj):
    """A go-to verifier that tracks exactly ``obj``."""
    from minigrid.envs.babyai.core.verifier import GoToInstr, ObjDesc

    instr = GoToInstr(ObjDesc(obj.type, obj.color))
    instr.reset_verifier(env)
    instr.desc.obj_set = [obj]
    instr.desc.obj_poss = [tuple(obj.cur_pos)]
    return instr
