"""Meta-World's tasks as this generator words them: a verb (the category), two or more natural wordings,
the objects the scene shows, the one the instruction is about, and whether the task carries an object
(then dropping it is a failure mode).

``MT10`` are the ten tasks of Meta-World's MT10 benchmark; the others are held out by default (the
quality benchmark's unseen tasks). Scenes that share a model file (``SHARED_SCENES``) can swap instructions
with the simulator's truth for the other task; so can reach, push and pick-place (``CROSS_SCENES``), whose
model files differ only in the goal marker's colour, where the goal stands where the video shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Task", "TASKS", "MT10", "HELD_OUT", "SHARED_SCENES", "CROSS_SCENES"]


@dataclass(frozen=True)
class Task:
    verb: str
    wordings: tuple[str, ...]
    target: str  # the object the instruction is about
    objects: tuple[str, ...]  # what the scene shows (besides the arm and the table)
    carries: bool = False  # the arm picks an object up: dropping it is a failure mode


def _t(verb, wordings, target, objects=None, carries=False) -> Task:
    return Task(verb, tuple(wordings), target, tuple(objects or (target,)), carries)


TASKS: dict[str, Task] = {
    # MT10
    "reach-v3": _t("reach", ["reach the goal with the gripper", "move the gripper to the target spot",
                             "put the gripper at the goal"], "goal", ["goal", "puck"]),
    "push-v3": _t("push", ["push the puck to the goal", "slide the puck over to the target",
                           "shove the puck onto the goal"], "puck", ["puck", "goal"]),
    "pick-place-v3": _t("pick_place", ["pick up the puck and place it at the goal",
                                       "lift the puck and put it on the target",
                                       "move the puck through the air to the goal"],
                        "puck", ["puck", "goal"], carries=True),
    "door-open-v3": _t("open", ["open the door", "pull the door open", "swing the door open"], "door"),
    "drawer-open-v3": _t("open", ["open the drawer", "pull the drawer open", "slide the drawer out"], "drawer"),
    "drawer-close-v3": _t("close", ["close the drawer", "push the drawer shut", "slide the drawer closed"], "drawer"),
    "button-press-topdown-v3": _t("press", ["press the button from above", "push the button down",
                                            "press down on the button"], "button"),
    "peg-insert-side-v3": _t("insert", ["insert the peg into the hole", "put the peg in the side hole",
                                        "slide the peg into the box"], "peg", ["peg", "box"], carries=True),
    "window-open-v3": _t("open", ["open the window", "slide the window open", "push the window open"], "window"),
    "window-close-v3": _t("close", ["close the window", "slide the window shut", "push the window closed"], "window"),
    # held out of MT10
    "button-press-v3": _t("press", ["press the button", "push the button in", "press the button from the front"],
                          "button"),
    "button-press-wall-v3": _t("press", ["press the button behind the wall",
                                         "reach past the wall and press the button"],
                               "button", ["button", "wall"]),
    "coffee-button-v3": _t("press", ["press the coffee machine's button", "push the button on the coffee machine"],
                           "coffee machine", ["coffee machine", "mug"]),
    "coffee-push-v3": _t("push", ["push the mug under the coffee machine", "slide the mug to the coffee machine"],
                         "mug", ["mug", "coffee machine"]),
    "coffee-pull-v3": _t("pull", ["pull the mug away from the coffee machine",
                                  "drag the mug out of the coffee machine"],
                         "mug", ["mug", "coffee machine"]),
    "dial-turn-v3": _t("turn", ["turn the dial", "rotate the dial", "spin the knob around"], "dial"),
    "door-close-v3": _t("close", ["close the door", "push the door shut", "swing the door closed"], "door"),
    "door-lock-v3": _t("lock", ["lock the door", "turn the lock down"], "lock", ["lock", "door"]),
    "door-unlock-v3": _t("unlock", ["unlock the door", "turn the lock to unlock it"], "lock", ["lock", "door"]),
    "faucet-open-v3": _t("turn", ["turn the faucet on", "open the faucet"], "faucet"),
    "faucet-close-v3": _t("turn", ["turn the faucet off", "close the faucet"], "faucet"),
    "handle-press-v3": _t("press", ["press the handle down", "push the handle down"], "handle"),
    "handle-pull-v3": _t("pull", ["pull the handle up", "lift the handle"], "handle"),
    "handle-press-side-v3": _t("press", ["press the side handle down", "push the handle down from the side"],
                               "handle"),
    "handle-pull-side-v3": _t("pull", ["pull the side handle up", "lift the handle from the side"], "handle"),
    "lever-pull-v3": _t("pull", ["pull the lever up", "raise the lever"], "lever"),
    "plate-slide-v3": _t("push", ["slide the plate into the goal", "push the plate into the net"], "plate",
                         ["plate", "net"]),
    "plate-slide-side-v3": _t("push", ["slide the plate sideways into the goal",
                                       "push the plate into the net from the side"],
                              "plate", ["plate", "net"]),
    "plate-slide-back-v3": _t("pull", ["slide the plate back out of the goal", "pull the plate out of the net"],
                              "plate", ["plate", "net"]),
    "plate-slide-back-side-v3": _t("pull", ["slide the plate back out sideways",
                                            "pull the plate out of the net sideways"],
                                   "plate", ["plate", "net"]),
    "push-wall-v3": _t("push", ["push the puck around the wall to the goal",
                                "slide the puck past the wall to the target"],
                       "puck", ["puck", "wall", "goal"]),
    "reach-wall-v3": _t("reach", ["reach over the wall to the goal", "move the gripper past the wall to the target"],
                        "goal", ["goal", "wall", "puck"]),
    "pick-place-wall-v3": _t("pick_place", ["pick up the puck and place it at the goal behind the wall",
                                            "lift the puck over the wall onto the target"],
                             "puck", ["puck", "wall", "goal"], carries=True),
    "hammer-v3": _t("hammer", ["hammer the nail in", "drive the nail with the hammer"], "hammer", ["hammer", "nail"],
                    carries=True),
    "hand-insert-v3": _t("insert", ["put the gripper in the hole", "insert the hand into the hole"], "hole",
                         ["hole", "puck"]),
    "sweep-into-v3": _t("push", ["sweep the puck into the hole", "push the puck into the hole"], "puck",
                        ["puck", "hole"]),
    "sweep-v3": _t("push", ["sweep the puck off the table edge", "push the puck off the side of the table"], "puck"),
    "basketball-v3": _t("pick_place", ["dunk the ball in the basket", "put the ball through the hoop"], "ball",
                        ["ball", "hoop"], carries=True),
    "shelf-place-v3": _t("pick_place", ["put the block on the shelf", "place the block on the shelf"], "block",
                         ["block", "shelf"], carries=True),
    "assembly-v3": _t("insert", ["put the ring onto the peg", "assemble the nut on the peg"], "ring", ["ring", "peg"],
                      carries=True),
    "disassemble-v3": _t("pull", ["take the ring off the peg", "lift the nut off the peg"], "ring", ["ring", "peg"],
                         carries=True),
    "box-close-v3": _t("close", ["put the lid on the box", "close the box with its lid"], "lid", ["lid", "box"],
                       carries=True),
    "soccer-v3": _t("push", ["kick the ball into the goal", "push the ball into the net"], "ball", ["ball", "net"]),
    "stick-push-v3": _t("push", ["push the bottle with the stick", "use the stick to push the bottle"], "stick",
                        ["stick", "bottle"], carries=True),
    "peg-unplug-side-v3": _t("pull", ["unplug the peg", "pull the peg out of the hole"], "peg", ["peg", "box"],
                             carries=True),
    "bin-picking-v3": _t("pick_place", ["move the cube to the other bin", "put the cube in the second bin"], "cube",
                         ["cube", "bin"], carries=True),
}

MT10 = ("reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "drawer-open-v3", "drawer-close-v3",
        "button-press-topdown-v3", "peg-insert-side-v3", "window-open-v3", "window-close-v3")
HELD_OUT = tuple(t for t in TASKS if t not in MT10)

# Tasks played in one scene (one model file) whose reset vector means the same thing (where the object, and
# the goal if any, stand): the video of one can be judged against the other's instruction by the simulator.
# (Others share a model file but place their goals differently: door-open/close, plate-slide/back,
# coffee-push/pull; handle-press/pull start with the other task done.) Checked: with the context replayed,
# the other task's success is not already reached for faucet, drawer-close -> open and hand-insert/sweep-into.
SHARED_SCENES: dict[str, tuple[str, ...]] = {
    "faucet-open-v3": ("faucet-close-v3",), "faucet-close-v3": ("faucet-open-v3",),
    "drawer-open-v3": ("drawer-close-v3",), "drawer-close-v3": ("drawer-open-v3",),
    "window-open-v3": ("window-close-v3",), "window-close-v3": ("window-open-v3",),
    "hand-insert-v3": ("sweep-into-v3",), "sweep-into-v3": ("hand-insert-v3",),
}

# Reach, push and pick-place: three model files with the same bodies, joints and puck (only the goal marker's
# colour differs: red, green, blue), and the same reset vector (the puck's x, y, z, then the goal's), so the
# physics state copies across and the other task's rule judges the same scene. Only where the goal the rule
# uses is the goal the video shows: reach and pick-place place it at the vector's goal (in the air, 5-30 cm
# up), push puts it on the table (its own vector's goal is 1-2 cm up; reach's rule then aims 0-1 cm from
# the marker). Left out: reach or pick-place videos judged as push (the marker floats above push's goal),
# and push judged as pick-place (pick-place's rule is the puck's distance to the goal alone, so a pushed puck
# would "pick and place"). Used by the instruction swaps when asked (``cross_task``).
CROSS_SCENES: dict[str, tuple[str, ...]] = {
    "reach-v3": ("pick-place-v3",), "pick-place-v3": ("reach-v3",), "push-v3": ("reach-v3",),
}
