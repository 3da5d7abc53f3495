"""What a pack someone hands you must hold before anything trains on it: every field of ``pack.json`` and every tensor.

A pack is data from elsewhere (a copy, a download, a colleague's folder): nothing in it is trusted until it is
checked, and every refusal is one line that names the file, the field and the fix (:class:`PackError`).

- ``pack.json`` (:func:`check_meta`): the types of every field; the examples' lists all one length; labels in their
  ranges (P(success) in [0, 1], markers and takeovers finite and not negative, failure modes among the config's);
  texts bounded (:data:`MAX_TEXT` characters, UTF-8, no terminal escapes); names that are names (encoders, held-out
  sets, failure modes: no path); the model config through its own checks (ranges, a vocabulary of at most
  ``MAX_CONFIG_LIST`` words, each a word), so a pack never trains into a model folder that does not load.
- the clips (:func:`clip_schema`, :func:`check_clips`): each tensor's name, dtype and shape are what the model
  reads (asked before it is allocated: float16 features where it reads features, uint8 where frames), its values
  finite, frame times increasing and not negative, durations positive, the label indices exactly what the labels and
  times give (``marker_indices``; the failure mode's index), the outcome frames' index inside the clip.
- the sentence vectors (:func:`check_sentences`): every instruction the examples hold has one, each part of unit
  length (no all-zero vector), no more than the instructions and their variants can ask.
- the encoder weights (:func:`weights_schema`): each tensor of the encoder's network, in its dtype and shape.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from autorater.data.paths import encodable, is_name, unprintable
from autorater.training.inputs.pack.files import REPACK, Expect, PackError, fail

MAX_TEXT = 2000  # characters of any text of a pack (an instruction, an id, a category)
MAX_ROWS = 10_000_000  # rows of a pack
SENTENCE_PARTS, SENTENCE_DIM = 3, 384  # a sentence vector: the whole instruction and each half, MiniLM's 384 each
VARIANTS = 64  # sentence vectors a pack may hold per instruction of its rows (mirrors, weaker wordings)

# examples' fields: kind, and whether older packs may leave them empty
EXAMPLES = {"suite_index": ("index", False), "continuation_ids": ("text", False), "scenario_keys": ("text", False),
            "task_keys": ("text", False), "video_paths": ("text", False), "instructions": ("instruction", False),
            "categories": ("text", False), "takeover_s": ("seconds", False), "p_success": ("probability", False),
            "marker_s": ("seconds_or_nan", False), "failure_mode": ("mode", False), "swapped": ("bool", True),
            "paraphrases": ("instructions", True), "twins": ("optional_text", True)}


def _text_problem(value, instruction: bool = False) -> str | None:
    if not isinstance(value, str):
        return f"{type(value).__name__}, not a string"
    if len(value) > MAX_TEXT:
        return f"{len(value)} characters, over {MAX_TEXT}"
    if not encodable(value):
        return "text UTF-8 cannot hold (a lone surrogate)"
    bad = unprintable(value, whitespace=instruction)
    return f"holds {bad} (a control character or terminal escape)" if bad else None


def _value_problem(kind: str, value, modes: set[str], suites: int) -> str | None:
    """What is wrong with one value of an examples' field of ``kind`` (None: nothing)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "index":
        return None if type(value) is int and 0 <= value < suites else f"{value!r} is not a suite's index"
    if kind in ("text", "instruction"):
        return _text_problem(value, kind == "instruction") or (None if value.strip() else "empty")
    if kind == "optional_text":
        return None if value is None else _text_problem(value)
    if kind == "instructions":
        if not isinstance(value, list) or len(value) > 64:
            return "not a list of at most 64 instructions"
        return next((p for v in value if (p := _text_problem(v, True))), None)
    if kind == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not true or false"
    if kind == "mode":
        return None if value is None or (isinstance(value, str) and value in modes) else \
            f"{str(value)[:60]!r} is not one of the config's failure modes"
    if not number or (kind != "seconds_or_nan" and not math.isfinite(value)):
        return f"{str(value)[:60]!r} is not a finite number"
    if kind == "probability":
        return None if 0.0 <= value <= 1.0 else f"{value!r} is out of [0, 1]"
    return None if math.isnan(value) or (math.isfinite(value) and 0.0 <= value < 1e6) else \
        f"{value!r} seconds is not a time in a video"


def field_error(path: Path, field: str, what: str, fix: str = REPACK) -> PackError:
    return fail(path, f"field {field!r}: {what}", fix)


def check_examples(examples, path: Path, modes: set[str], suites: int) -> int:
    """``examples`` (pack.json's) checked field by field; the number of rows."""
    required = {k for k, (_, optional) in EXAMPLES.items() if not optional}
    if not isinstance(examples, dict) or not required <= set(examples) <= set(EXAMPLES):
        raise field_error(path, "examples", f"an object of the fields {sorted(EXAMPLES)} (older packs may lack "
                                            f"{sorted(set(EXAMPLES) - required)})")
    n = len(examples["continuation_ids"]) if isinstance(examples["continuation_ids"], list) else -1
    if not 0 < n <= MAX_ROWS:
        raise field_error(path, "examples.continuation_ids", f"a list of 1 to {MAX_ROWS} ids")
    for name, (kind, optional) in EXAMPLES.items():
        values = examples.get(name, [])
        if not isinstance(values, list) or not (len(values) == n or (optional and not values)):
            got = len(values) if isinstance(values, list) else type(values).__name__
            raise field_error(path, f"examples.{name}", f"a list of {n} values (one per row), got {got}")
        for row, value in enumerate(values):
            problem = _value_problem(kind, value, modes, suites)
            if problem:
                raise field_error(path, f"examples.{name}", f"row {row}: {problem}")
    return n


def _is_texts(value, limit: int = MAX_ROWS) -> bool:
    return isinstance(value, list) and len(value) <= limit and all(_text_problem(v) is None for v in value)


def check_meta(meta, path: Path) -> int:
    """pack.json's object checked (module docstring), but the model config (:func:`model_config`); its rows."""
    if not isinstance(meta, dict):
        raise fail(path, "not a JSON object", REPACK)
    required = ("model_config", "cache_key", "is_frames", "pixel_cells", "decisive", "groups", "sources",
                "suite_names", "encoders", "examples")
    missing = [k for k in required if k not in meta]
    if missing:
        raise field_error(path, missing[0], "missing")
    if not isinstance(meta["model_config"], dict):
        raise field_error(path, "model_config", "not an object")
    suites = meta["suite_names"]
    if not _is_texts(suites, 10_000) or not suites:
        raise field_error(path, "suite_names", "a list of 1 to 10,000 names of suites")
    if not isinstance(meta["sources"], list) or len(meta["sources"]) != len(suites) or \
            not all(s is None or isinstance(s, dict) and is_name(s.get("world", "none")) for s in meta["sources"]):
        raise field_error(path, "sources", f"a list of {len(suites)} objects (each world a name) or nulls, one per "
                                           f"suite")
    if not isinstance(meta["cache_key"], str) or _text_problem(meta["cache_key"]):
        raise field_error(path, "cache_key", "not a string")
    if not isinstance(meta["is_frames"], bool):
        raise field_error(path, "is_frames", "not true or false")
    if type(meta["pixel_cells"]) is not int or not 0 <= meta["pixel_cells"] <= 16:
        raise field_error(path, "pixel_cells", "not an integer in [0, 16]")
    if not isinstance(meta["encoders"], list) or not all(is_name(e) for e in meta["encoders"]):
        raise field_error(path, "encoders", "not a list of encoder names (a name, never a path)")
    modes = meta["model_config"].get("failure_modes", [])
    if not isinstance(modes, list) or not all(is_name(m) for m in modes):
        raise field_error(path, "model_config.failure_modes", "not a list of names")
    n = check_examples(meta["examples"], path, set(modes), len(suites))
    if not _is_texts(meta["decisive"], 100_000):
        raise field_error(path, "decisive", "not a list of categories")
    groups = meta["groups"]
    if groups is not None and (not _is_texts(groups) or len(groups) != n):
        raise field_error(path, "groups", f"a list of {n} split groups (one per row) or null")
    check_held_out_names(meta.get("held_out", {}), path)
    return n


def check_held_out_names(held, path: Path) -> None:
    if not isinstance(held, dict) or len(held) > 100 or not all(is_name(k) for k in held):
        raise field_error(path, "held_out", "an object of at most 100 held-out sets, each named by a name (no path)")


def check_held_out(held, name: str, path: Path) -> int:
    """Held-out set ``name`` of pack.json checked; its rows."""
    field = f"held_out.{name}"
    keys = ("ids", "instructions", "takeovers_s", "scenarios", "truth", "errors", "is_frames")
    if not isinstance(held, dict) or set(held) != set(keys):
        raise field_error(path, field, f"an object of the fields {sorted(keys)}")
    n = len(held["ids"]) if _is_texts(held["ids"]) else -1
    if n <= 0:
        raise field_error(path, f"{field}.ids", "a list of 1 or more continuation ids")
    for key, kind in (("instructions", "instruction"), ("takeovers_s", "seconds"), ("scenarios", "text")):
        values = held[key]
        if not isinstance(values, list) or len(values) != n:
            raise field_error(path, f"{field}.{key}", f"a list of {n} values")
        problem = next((f"row {i}: {p}" for i, v in enumerate(values) if (p := _value_problem(kind, v, set(), 0))),
                       None)
        if problem:
            raise field_error(path, f"{field}.{key}", problem)
    if not isinstance(held["truth"], list) or len(held["truth"]) != n or \
            not all(t in ("success", "failure", None) for t in held["truth"]):
        raise field_error(path, f"{field}.truth", f"a list of {n} outcomes (success, failure or null)")
    errors = held["errors"]
    if not isinstance(errors, dict) or not all(k.isdigit() and int(k) < n and _text_problem(v) is None
                                               for k, v in errors.items()):
        raise field_error(path, f"{field}.errors", "an object of row numbers and messages")
    if not isinstance(held["is_frames"], bool):
        raise field_error(path, f"{field}.is_frames", "not true or false")
    return n


def model_config(d: dict, path: Path):
    """The pack's model config through its own checks (``AutoConfig.from_dict``: types, ranges, a vocabulary of at
    most ``MAX_CONFIG_LIST`` entries), each learned word a word."""
    from autorater.models import AutoConfig

    try:
        config = AutoConfig.from_dict(d)
    except ValueError as err:
        raise field_error(path, "model_config", str(err)) from None
    from autorater.encoders import frame_encoder_spec

    try:
        frame_encoder_spec(config.encoder)  # a registered encoder's name, never a path
    except ValueError as err:
        raise field_error(path, "model_config.encoder", str(err)) from None
    vocab = d.get("vocab") or []  # a list of strings (the config's own check): each a word
    bad = next((w for w in vocab if not (w.isascii() and w.isalpha() and w.islower())), None)
    if bad is not None or len(set(vocab)) != len(vocab):
        raise field_error(path, "model_config.vocab", f"{str(bad)[:40]!r} is not a word (lower-case letters), or a "
                                                      f"word repeats")
    return config


def clip_schema(path: Path, n: int, frames: int, shapes: dict[str, tuple[torch.dtype, tuple]], labels: bool) -> Expect:
    """What the clips file of ``n`` rows must hold, from what the model's cache stores (``Autorater.cached_shapes``:
    ``"x"`` per frame, its other keys per clip): ``features`` (n, t, ...) with 1 <= t <= ``frames``, ``times_s``
    (n, t) float32, ``durations_s`` (n,) float32, ``encoded.<key>`` (n, ...); with ``labels``, the label indices (n,)
    int64."""
    want = {"features": shapes["x"], "times_s": (torch.float32, ()), "durations_s": (torch.float32, None),
            **{f"encoded.{k}": v for k, v in shapes.items() if k != "x"}}
    if labels:
        want.update(marker_index=(torch.int64, None), failure_index=(torch.int64, None))
    seen: dict[str, tuple] = {}

    def expect(name: str, dtype: torch.dtype, shape: tuple) -> None:
        if name not in want:
            raise fail(path, f"tensor {name!r} is not one the model reads (it reads {sorted(want)})", REPACK)
        kind, rest = want[name]
        t = shape[1] if len(shape) > 1 else None
        ok = dtype == kind and len(shape) >= 1 and shape[0] == n and (
            rest is None and len(shape) == 1 or
            name in ("features", "times_s") and t is not None and 1 <= t <= frames and tuple(shape[2:]) == tuple(rest)
            or name.startswith("encoded.") and tuple(shape[1:]) == tuple(rest))
        if not ok:
            shown = "(n,)" if rest is None else f"(n, t, {', '.join(map(str, rest))})" if name in ("features",
                                                                                                     "times_s") else \
                f"(n, {', '.join(map(str, rest))})"
            raise fail(path, f"tensor {name!r} is {dtype} {tuple(shape)}; the model reads {kind} {shown} with "
                             f"n = {n} rows and t <= {frames} frames", REPACK)
        seen[name] = tuple(shape)
        if {"features", "times_s"} <= set(seen) and seen["features"][1] != seen["times_s"][1]:
            raise fail(path, "tensors 'features' and 'times_s' hold different numbers of frames", REPACK)

    expect.want = want  # type: ignore[attr-defined]
    return expect


def _finite(x: torch.Tensor, rows: int = 256) -> bool:
    """Every value finite, a few rows at a time (no copy of a large tensor)."""
    return not x.is_floating_point() or all(bool(torch.isfinite(x[i:i + rows]).all()) for i in range(0, len(x), rows))


def check_clips(t: dict[str, torch.Tensor], path: Path, want: dict, takeover_s: list[float] | None = None) -> None:
    """The clips' values (module docstring): every tensor present, finite, times and durations in range, the outcome
    frames' index inside the clip."""
    missing = sorted(set(want) - set(t))
    if missing:
        raise fail(path, f"tensor {missing[0]!r} is missing", REPACK)
    bad = next((k for k, v in t.items() if not _finite(v)), None)
    if bad:
        raise fail(path, f"tensor {bad!r} holds NaN or infinite values", REPACK)
    times, durations = t["times_s"], t["durations_s"]
    if bool((times < 0).any()) or bool((times[:, 1:] < times[:, :-1]).any()):
        raise fail(path, "tensor 'times_s': frame times negative or going back", REPACK)
    if not bool((durations > 0).all()) or bool((durations > 1e6).any()):
        raise fail(path, "tensor 'durations_s': a duration not in (0, 1e6) seconds", REPACK)
    frames = times.shape[1]
    for name, value in t.items():
        if name.startswith("encoded.") and name.endswith("_index") and (bool((value < 0).any()) or
                                                                         bool((value >= frames).any())):
            raise fail(path, f"tensor {name!r}: a frame index outside the clip's {frames} frames", REPACK)


def check_labels(t: dict[str, torch.Tensor], path: Path, examples: dict, failure_modes: list[str]) -> None:
    """The label indices are the labels': the marker's frame (``marker_indices`` of the rows' markers and frame
    times) and the failure mode's index (-1: none or a success)."""
    from autorater.training.inputs.dataset import marker_indices

    marker = marker_indices(np.array(examples["marker_s"], dtype=float), t["times_s"].numpy(),
                            t["durations_s"].numpy())
    if not np.array_equal(marker, t["marker_index"].numpy()):
        row = int(np.flatnonzero(marker != t["marker_index"].numpy())[0])
        raise fail(path, f"tensor 'marker_index', row {row}: {int(t['marker_index'][row])}, where the row's marker "
                         f"({examples['marker_s'][row]} s) and frame times give {int(marker[row])}", REPACK)
    index = {m: i for i, m in enumerate(failure_modes)}
    failure = [index.get(m, -1) if p < 0.5 else -1 for m, p in zip(examples["failure_mode"], examples["p_success"])]
    if failure != t["failure_index"].tolist():
        row = next(i for i, (a, b) in enumerate(zip(failure, t["failure_index"].tolist())) if a != b)
        raise fail(path, f"tensor 'failure_index', row {row}: {t['failure_index'][row]}, where the row's failure mode "
                         f"gives {failure[row]}", REPACK)


def sentence_schema(path: Path, budgets: set[int], texts: int) -> Expect:
    """What the sentence vectors' file may hold: ``"<budget>|<text>"`` -> (3 x 384,) float32, the budgets the model
    reads, at most :data:`VARIANTS` per instruction of the rows."""
    count = [0]

    def expect(name: str, dtype: torch.dtype, shape: tuple) -> None:
        budget, bar, text = name.partition("|")
        count[0] += 1
        if not bar or not budget.isdigit() or int(budget) not in budgets or _text_problem(text, True):
            raise fail(path, f"vector {name[:60]!r}: not '<token budget>|<instruction>' of a budget the model reads "
                             f"({sorted(budgets)})", REPACK)
        if dtype != torch.float32 or tuple(shape) != (SENTENCE_PARTS * SENTENCE_DIM,):
            raise fail(path, f"vector {name[:60]!r} is {dtype} {tuple(shape)}, not float32 "
                             f"({SENTENCE_PARTS * SENTENCE_DIM},)", REPACK)
        if count[0] > VARIANTS * texts:
            raise fail(path, f"more than {VARIANTS} vectors per instruction of the pack's rows", REPACK)

    return expect


def check_sentences(vectors: dict[str, torch.Tensor], path: Path, budgets: set[int], texts: set[str]) -> None:
    """Every instruction has a vector of every budget; every vector's parts are of unit length."""
    for budget in sorted(budgets):
        missing = next((x for x in sorted(texts) if f"{budget}|{x}" not in vectors), None)
        if missing is not None:
            raise fail(path, f"no vector of instruction {missing[:60]!r} (token budget {budget})", REPACK)
    for name, vector in vectors.items():
        norms = vector.view(SENTENCE_PARTS, SENTENCE_DIM).norm(dim=-1)
        if not bool(torch.isfinite(norms).all()) or bool(((norms - 1).abs() > 1e-3).any()):
            raise fail(path, f"vector {name[:60]!r}: its parts are not of unit length (an all-zero or damaged "
                             f"vector)", REPACK)


def weights_schema(path: Path, shapes: dict[str, tuple[torch.dtype, tuple]]) -> Expect:
    """What an encoder's weights file must hold: each tensor of its network, in its dtype and shape."""

    def expect(name: str, dtype: torch.dtype, shape: tuple) -> None:
        if name not in shapes:
            raise fail(path, f"tensor {name[:80]!r} is not one of the encoder's", REPACK)
        if (dtype, tuple(shape)) != shapes[name]:
            raise fail(path, f"tensor {name[:80]!r} is {dtype} {tuple(shape)}, the encoder's is "
                             f"{shapes[name][0]} {shapes[name][1]}", REPACK)

    return expect


__all__ = ["EXAMPLES", "MAX_ROWS", "MAX_TEXT", "check_clips", "check_examples", "check_held_out",
           "check_held_out_names", "check_labels", "check_meta", "check_sentences", "clip_schema", "field_error",
           "model_config", "sentence_schema", "weights_schema"]
