"""Fuzzing: randomly corrupted suites, videos and Label Studio exports end in a clear error or a clean skip.

Each case corrupts one input at random (truncation, flipped bytes, non-UTF-8, wrong types, huge or
non-finite values, deleted fields, duplicated lines, a video that is really text, a missing file)
and asserts that the reader either accepts it or reports problems through its documented error
(``Problem`` list, ``SuiteFormatError``, ``VideoError``, ``ValueError``): never another exception.
"""

from __future__ import annotations

import copy
import json
import random
import shutil

import pytest

from autorater.data.suite import Suite, SuiteFormatError, validate_suite
from autorater.data.video import VideoError, read_video
from autorater.serving.labelstudio.formats import annotations_to_export, parse_export
from tiny_suites import tiny_suite

WEIRD = [None, -1e308, 1e308, "", [], {}, True, False, "x" * 5000, -1, 0, 3.5, "NaN", {"a": [1, {"b": None}]},
         "../../etc/passwd", "\u0000", 2 ** 70]
JSONL = ["suite.json", "scenarios.jsonl", "continuations.jsonl", "annotations.jsonl", "references.jsonl"]


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    op = rng.randrange(7)
    if op == 0 or not data:
        return data[: rng.randrange(len(data) + 1)]
    if op == 1:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if op == 2:
        i = rng.randrange(len(data))
        return data[:i] + b"\xff\xfe\xc3" + data[i:]
    if op == 3:
        return b""
    if op == 4:
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [lines[i]] + lines[i:])
    if op == 5:
        return data + b"\n{\"continuation_id\": " + str(rng.random()).encode()
    return b"NaN\n[1, 2]\n\"just a string\"\n" + data


def _mutate_json_line(data: bytes, rng: random.Random, whole: bool = False) -> bytes:
    """Replace or delete one field of one record (of the one object, for suite.json)."""
    text = data.decode("utf-8")
    lines = [json.dumps(json.loads(text))] if whole else [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return data
    i = rng.randrange(len(lines))
    obj = json.loads(lines[i])
    key = rng.choice(list(obj))
    if rng.random() < 0.3:
        del obj[key]
    else:
        obj[key] = copy.deepcopy(rng.choice(WEIRD))
    lines[i] = json.dumps(obj)
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz") / "base"
    tiny_suite(root)
    return root


def test_corrupted_suites_give_problems_never_a_traceback(base, tmp_path):
    rng = random.Random(0)
    tried = handled = 0
    for case in range(320):
        root = tmp_path / f"s{case}"
        shutil.copytree(base, root)
        target = root / rng.choice(JSONL + ["videos"] * 2)
        if target.name == "videos":
            target = rng.choice(sorted(target.iterdir()))
        if rng.random() < 0.05:
            target.unlink()
        elif target.suffix in (".json", ".jsonl") and rng.random() < 0.5:
            target.write_bytes(_mutate_json_line(target.read_bytes(), rng, whole=target.suffix == ".json"))
        elif target.suffix == ".mp4" and rng.random() < 0.3:
            target.write_text("this is not a video, it is text")
        else:
            target.write_bytes(_mutate_bytes(target.read_bytes(), rng))
        tried += 1
        problems = validate_suite(root, check_videos=True)
        assert isinstance(problems, list)
        for p in problems:
            assert p.file and p.message  # every problem names the file and says what is wrong
        try:
            Suite.load(root)
        except SuiteFormatError:
            pass
        handled += 1
        shutil.rmtree(root)
    assert tried == handled == 320


def test_corrupted_videos_raise_video_error_only(base, tmp_path):
    rng = random.Random(1)
    videos = sorted((base / "videos").iterdir())
    for case in range(100):
        path = tmp_path / f"v{case}.mp4"
        data = rng.choice(videos).read_bytes()
        path.write_bytes(_mutate_bytes(data, rng) if case % 5 else b"GIF89a not a video")
        try:
            clip = read_video(path, num_frames=4, size=16)
            assert clip.frames.shape[1:] == (16, 16, 3)
        except VideoError as err:
            assert str(path) in str(err)


def _mutate_tree(obj, rng: random.Random):
    """Replace or delete one random node of a JSON tree."""
    containers = []

    def walk(x):
        if isinstance(x, dict):
            containers.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            containers.append(x)
            for v in x:
                walk(v)
    walk(obj)
    c = rng.choice(containers)
    if isinstance(c, dict) and c:
        k = rng.choice(list(c))
        if rng.random() < 0.3:
            del c[k]
        else:
            c[k] = copy.deepcopy(rng.choice(WEIRD))
    elif isinstance(c, list) and c:
        c[rng.randrange(len(c))] = copy.deepcopy(rng.choice(WEIRD))
    return obj


def test_corrupted_label_studio_exports_give_problems_never_a_traceback(tmp_path):
    from autorater.data.suite import Annotation

    tasks = [{"data": {"continuation_id": f"c{i}", "video": f"v/c{i}.mp4", "instruction": "go", "fps": 8.0,
                       "frames": 20}} for i in range(4)]
    answers = [Annotation(f"c{i}", f"h{j}", "success" if (i + j) % 2 else "failure", marker_s=0.5 * i)
               for i in range(4) for j in range(2)]
    clean = annotations_to_export(tasks, answers)
    known = {t["data"]["continuation_id"]: t["data"] for t in tasks}
    rng = random.Random(2)
    path = tmp_path / "export.json"
    for case in range(200):
        export = copy.deepcopy(clean)
        for _ in range(rng.randint(1, 3)):
            export = _mutate_tree(export, rng)
        text = json.dumps(export).encode()
        path.write_bytes(_mutate_bytes(text, rng) if case % 4 == 0 else text)
        try:
            parsed = parse_export(path, known)
        except ValueError as err:
            assert "export" in str(err) or str(path) in str(err)
            continue
        assert len(parsed.annotations) <= len(answers)
        for a in parsed.annotations:  # what is accepted is a valid SUITE_FORMAT annotation
            assert a.outcome in ("success", "failure") and a.continuation_id in known
            assert isinstance(a.annotator_id, str) and a.created_at is None or isinstance(a.created_at, str)
            assert 0 <= a.marker_s <= 20 / 8.0
