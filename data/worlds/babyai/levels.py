"""BabyAI levels and instructions: the levels a suite may use, environments, instruction *specs*.

A spec is a JSON form of a BabyAI instruction, e.g. ``{"verb": "put_next", "object": {"type": "key",
"color": "red", "loc": null}, "fixed": {"type": "ball", "color": null, "loc": null}}``; ``verb`` is also the
scenario category (``go_to``, ``pick_up``, ``put_next``, ``open``). Everything here is deterministic for a
level and an environment seed.
"""

from __future__ import annotations

import contextlib
import io

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


def desc_to_dict(desc) -> dict:
    return {"type": desc.type, "color": desc.color, "loc": desc.loc}


def dict_to_desc(d: dict):
    from minigrid.envs.babyai.core.verifier import ObjDesc

    return ObjDesc(d.get("type"), d.get("color"), d.get("loc"))


def instr_to_spec(instr) -> dict:
    """The JSON spec of a single BabyAI action instruction."""
    from minigrid.envs.babyai.core.verifier import GoToInstr, OpenInstr, PickupInstr, PutNextInstr

    if isinstance(instr, GoToInstr):
        return {"verb": "go_to", "object": desc_to_dict(instr.desc)}
    if isinstance(instr, PickupInstr):
        return {"verb": "pick_up", "object": desc_to_dict(instr.desc)}
    if isinstance(instr, OpenInstr):
        return {"verb": "open", "object": desc_to_dict(instr.desc)}
    if isinstance(instr, PutNextInstr):
        return {"verb": "put_next", "object": desc_to_dict(instr.desc_move),
                "fixed": desc_to_dict(instr.desc_fixed)}
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
        instr = GoToInstr(dict_to_desc(spec["object"]))
    elif verb == "pick_up":
        instr = PickupInstr(dict_to_desc(spec["object"]), strict=False)
    elif verb == "open":
        instr = OpenInstr(dict_to_desc(spec["object"]), strict=False)
    elif verb == "put_next":
        instr = PutNextInstr(dict_to_desc(spec["object"]), dict_to_desc(spec["fixed"]), strict=False)
    else:
        raise ValueError(f"unknown verb {verb!r} in instruction spec; expected one of {CATEGORIES}")
    instr.reset_verifier(env)
    return instr


def describe(spec: dict, env) -> str:
    """The instruction in words ("put the red key next to a ball"), at the env's current state."""
    return build_instr(spec, env).surface(env)


def target_sets(instr) -> tuple[list, list]:
    """(objects the instruction acts on, objects it puts things next to)."""
    if hasattr(instr, "desc_move"):
        return list(instr.desc_move.obj_set), list(instr.desc_fixed.obj_set)
    return list(instr.desc.obj_set), []


def contains(objs, obj) -> bool:
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
    move, fixed = target_sets(instr)
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
        a_move, a_fixed = target_sets(alt)
        if not a_move or (new["verb"] == "put_next" and not a_fixed):
            return
        if new["verb"] == "put_next":
            if any(contains(a_fixed, o) for o in a_move) or alt.objs_next():
                return  # the level's own rejection rules for put next
        seen.add(key)
        out.append(new)

    def plain(o) -> dict:
        return {"type": o.type, "color": o.color, "loc": None}

    objs = scene_objects(env)
    for o in objs:
        if contains(move, o):
            continue
        d = plain(o)
        others = build_instr({"verb": "go_to", "object": d}, env).desc.obj_set
        if any(contains(move, x) for x in others):
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
            if contains(fixed, o) or contains(move, o):
                continue
            d = plain(o)
            named = build_instr({"verb": "go_to", "object": d}, env).desc.obj_set
            if any(contains(fixed, x) for x in named):
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



def front_cell(env):
    return env.grid.get(*env.front_pos)
