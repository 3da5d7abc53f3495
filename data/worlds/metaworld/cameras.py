"""Where Meta-World videos are seen from: the scene's named cameras, or a free camera drawn per scenario.

A drawn camera (``--camera random``) is a MuJoCo *free* camera: it looks at a point (``lookat``) from
``distance`` metres, turned ``azimuth`` degrees about the vertical and tilted ``elevation`` degrees (negative:
looking down), with a vertical field of view of ``fovy`` degrees. A free camera never rolls, so its frames
are upright. The range (``RANGE``) goes all round the table except behind the robot, where its body hides
the table; from 15 to 65 degrees above the table; 0.9-1.7 m away; 35-55 degrees of view; the point looked at
is the middle of what the task moves, give or take a few centimetres. A pose is kept only when every object
of the task, the goal and the expert's hand stay inside the frame (``IN_VIEW``) all the way from the start to
the expert's success.

Held-out cameras: a named camera kept out of the range (``hold_out``) rules out every pose whose optical axis
(the direction it looks in) lies within ``hold_out_degrees`` (30 by default) of that camera's axis, so an
evaluation from that camera sees a viewpoint no training video came near.

Example:
    >>> pose = CameraPose(lookat=(0.0, 0.65, 0.1), distance=1.2, azimuth=45.0, elevation=-30.0, fovy=45.0)
    >>> round(float(pose.project([[0.0, 0.65, 0.1]])[0][0]), 3)   # the point looked at is the frame's centre
    0.0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

__all__ = ["CameraPose", "Sightlines", "RANDOM", "RANGE", "IN_VIEW", "HOLD_OUT_DEGREES", "CLEARANCE",
           "ARM_LINKS", "draw_pose", "named_axis", "angle_degrees", "arm_links"]

RANDOM = "random"  # the camera name that asks for a drawn pose
RANGE = {"azimuth_gap": (50.0, 130.0),  # degrees never drawn: behind the robot (it looks along +y from there)
         "elevation": (-65.0, -15.0), "distance": (0.9, 1.7), "fovy": (35.0, 55.0),
         "lookat_jitter": (0.08, 0.08, 0.04)}  # metres, each way, around the middle of the task's points
IN_VIEW = 0.85  # the task's points stay within this share of the half-frame from the centre
HOLD_OUT_DEGREES = 30.0
_TRIES = 1000


@dataclass(frozen=True)
class CameraPose:
    """A free camera: ``lookat`` (x, y, z metres), ``distance`` (m), ``azimuth``, ``elevation`` and ``fovy``
    (degrees; elevation negative looks down)."""

    lookat: tuple[float, float, float]
    distance: float
    azimuth: float
    elevation: float
    fovy: float

    @classmethod
    def from_dict(cls, d: dict) -> "CameraPose":
        return cls(tuple(float(v) for v in d["lookat"]), float(d["distance"]), float(d["azimuth"]),
                   float(d["elevation"]), float(d["fovy"]))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["lookat"] = list(self.lookat)
        return d

    def axis(self) -> np.ndarray:
        """The unit direction the camera looks in (world frame)."""
        az, el = np.radians(self.azimuth), np.radians(self.elevation)
        return np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])

    def position(self) -> np.ndarray:
        return np.asarray(self.lookat) - self.distance * self.axis()

    def project(self, points) -> np.ndarray:
        """(n, 3) world points -> (n, 2) frame coordinates: x right, y up, -1..1 across the (square) frame;
        points behind the camera come out as inf."""
        forward = self.axis()
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, forward)
        rel = np.atleast_2d(np.asarray(points, dtype=np.float64)) - self.position()
        depth = rel @ forward
        scale = np.tan(np.radians(self.fovy) / 2) * np.where(depth > 1e-6, depth, np.nan)
        out = np.stack([rel @ right / scale, rel @ up / scale], axis=1)
        return np.where(np.isfinite(out), out, np.inf)


def angle_degrees(a, b) -> float:
    """The angle between two directions, in degrees."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def named_axis(model, name: str) -> np.ndarray:
    """The optical axis (unit, world frame) of the named camera ``name`` of a MuJoCo model (the cameras of
    Meta-World's scenes are fixed to the world)."""
    import mujoco

    cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if cam < 0:
        raise ValueError(f"the scene has no camera {name!r}")
    return -np.asarray(model.cam_mat0[cam]).reshape(3, 3)[:, 2]  # a camera looks along its -z


class Sightlines:
    """Whether a camera at a pose sees the task: it keeps ``CLEARANCE`` from every arm link along the
    expert's run; at the start nothing stands between it and the task's objects, and nothing but the robot
    between it and the hand; no part of the robot hides the goal at the start, nor (the gripper aside, which
    covers what it holds) the objects and the goal at the expert's success. A camera inside a geom (a door,
    a drawer's box) fails the objects' sightlines.

    Args:
        model: the scene's MuJoCo model.
        start, success: ``MjData`` snapshots of the two states.
        start_points, success_points: (2 + objects, 3) the hand, the task's objects and the goal in each.
        arm: (k, links, 3) the arm's link positions along the expert's run (``arm_links``).
    """

    def __init__(self, model, start, start_points, success, success_points, arm: np.ndarray):
        self.model, self.start, self.success = model, start, success
        self.segments = np.stack([arm[:, :-1], arm[:, 1:]], axis=2).reshape(-1, 2, 3)  # (m, 2, 3)
        robot = np.isin(model.geom_bodyid, sorted(_descendants(model, "base")))
        gripper = np.isin(model.geom_bodyid, sorted(_descendants(model, "right_hand")))
        nothing = np.zeros_like(robot)
        start_points, success_points = np.asarray(start_points), np.asarray(success_points)
        self.checks = ([(start, start_points[0], robot)]  # the hand: only the scene can hide it
                       + [(start, p, nothing) for p in start_points[1:-1]]  # the objects: anything
                       + [(start, start_points[-1], ~robot)]  # the goal: the robot (it may sit in an object)
                       + [(success, p, ~robot | gripper) for p in success_points[1:]])  # the arm, not the gripper

    def __call__(self, pose: CameraPose) -> bool:
        eye = pose.position()
        if _distance_to_segments(eye, self.segments) < CLEARANCE:
            return False
        return all(self._clear(eye, point, data, allowed) for data, point, allowed in self.checks)

    def _clear(self, eye: np.ndarray, point: np.ndarray, data, allowed: np.ndarray) -> bool:
        """No geom outside ``allowed`` on the line from 4 cm off ``point`` (out of the object itself) to
        ``eye``."""
        import mujoco

        ray = eye - point
        length = float(np.linalg.norm(ray))
        unit = ray / length
        start, geom = point + 0.04 * unit, np.zeros(1, np.int32)
        for _ in range(8):  # past the allowed geoms, one hit at a time
            hit = mujoco.mj_ray(self.model, data, start, unit, None, 1, -1, geom)
            if hit < 0 or float((start - point) @ unit) + hit >= length:
                return True
            if not allowed[geom[0]]:
                return False
            start = start + (hit + 1e-3) * unit
        return False


ARM_LINKS = ("right_l0", "right_l1", "right_l2", "right_l3", "right_l4", "right_l5", "right_l6", "right_hand",
             "hand")  # the Sawyer arm's chain, base to gripper
CLEARANCE = 0.25  # metres between a drawn camera and the arm's links (the thickest are about 8 cm across)


def arm_links(model, data) -> np.ndarray:
    """(links, 3): where the arm's links (``ARM_LINKS``) are in ``data``."""
    return np.stack([data.body(name).xpos.copy() for name in ARM_LINKS])


def _descendants(model, name: str) -> set[int]:
    import mujoco

    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    out = {root}
    for body in range(model.nbody):  # a parent's id is always lower than its child's
        if model.body_parentid[body] in out and body != 0:
            out.add(body)
    return out


def _distance_to_segments(point: np.ndarray, segments: np.ndarray) -> float:
    a, b = segments[:, 0], segments[:, 1]
    ab = b - a
    t = np.clip(np.einsum("ij,ij->i", point - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-12), 0, 1)
    return float(np.min(np.linalg.norm(a + t[:, None] * ab - point, axis=1))) if len(segments) else np.inf


def draw_pose(rng: np.random.Generator, points, held_out: Sequence[np.ndarray] = (),
              hold_out_degrees: float = HOLD_OUT_DEGREES, sees=None) -> CameraPose:
    """A camera pose from ``RANGE`` that keeps every one of ``points`` ((n, 3) metres) in view, looks at
    least ``hold_out_degrees`` away from each axis in ``held_out`` and, if given, passes ``sees(pose)``
    (``Sightlines``). Values are rounded (a recorded pose renders the same frames again).

    Raises:
        RuntimeError: when no pose in ``_TRIES`` draws keeps the points in view.
    """
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    middle = (points.min(0) + points.max(0)) / 2
    gap_lo, gap_hi = RANGE["azimuth_gap"]
    for _ in range(_TRIES):
        azimuth = (gap_hi + rng.uniform(0.0, 360.0 - (gap_hi - gap_lo))) % 360.0
        elevation, distance = rng.uniform(*RANGE["elevation"]), rng.uniform(*RANGE["distance"])
        fovy = rng.uniform(*RANGE["fovy"])
        lookat = middle + rng.uniform(-1.0, 1.0, 3) * np.asarray(RANGE["lookat_jitter"])
        pose = CameraPose(tuple(round(float(v), 4) for v in lookat), round(float(distance), 4),
                          round(float(azimuth), 3), round(float(elevation), 3), round(float(fovy), 3))
        if any(angle_degrees(pose.axis(), axis) < hold_out_degrees for axis in held_out):
            continue
        if np.all(np.abs(pose.project(points)) <= IN_VIEW) and (sees is None or sees(pose)):
            return pose
    raise RuntimeError(f"no camera in the range kept the task's {len(points)} points in view in {_TRIES} draws; "
                       f"widen RANGE['distance'] or lower hold_out_degrees")
