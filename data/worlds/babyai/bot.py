"""The BabyAI expert bot (minigrid's ``BabyAIBot``) made robust to off-policy play: it replans from the
action actually taken, and is rebuilt from the current state if it breaks."""

from __future__ import annotations

from autorater.data.worlds.babyai.levels import DONE, DROP, contains


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


def goto_object_instr(env, obj):
    """A go-to verifier that tracks exactly ``obj``."""
    from minigrid.envs.babyai.core.verifier import GoToInstr, ObjDesc

    instr = GoToInstr(ObjDesc(obj.type, obj.color))
    instr.reset_verifier(env)
    instr.desc.obj_set = [obj]
    instr.desc.obj_poss = [tuple(obj.cur_pos)]
    return instr
