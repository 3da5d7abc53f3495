"""The suite format v1 (docs/suite-format.md): round trip, and every validation rule with its file, line and fix."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from autorater.app.cli import main
from autorater.data.suite import (
    ANNOTATIONS_FILE,
    CONTINUATIONS_FILE,
    REFERENCES_FILE,
    SCENARIOS_FILE,
    SUITE_FILE,
    Annotation,
    Continuation,
    Reference,
    Scenario,
    Suite,
    SuiteFormatError,
    SuiteInfo,
    validate_suite,
)
from tiny_suites import DURATION_S, read_lines, tiny_suite, write_lines

SC, CO, AN, RE = SCENARIOS_FILE, CONTINUATIONS_FILE, ANNOTATIONS_FILE, REFERENCES_FILE


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("template") / "suite"
    tiny_suite(root)
    return root


@pytest.fixture
def suite_dir(template, tmp_path) -> Path:
    """A fresh copy of the valid tiny suite (videos included) that a test may break."""
    return Path(shutil.copytree(template, tmp_path / "suite"))


def _without_line(record):
    """The record as written: the reader's bookkeeping (``_line``) removed from ``extra``."""
    return dataclasses.replace(record, extra={k: v for k, v in record.extra.items() if not k.startswith("_")})


# ----------------------------------------------------------------------------------------------
# Round trip


def test_round_trip_keeps_every_field_and_unknown_fields(tmp_path):
    original = tiny_suite(tmp_path / "a", videos=False)
    loaded = Suite.load(tmp_path / "a")
    assert loaded.info == original.info and loaded.info.extra == {"owner": "data-team"}
    for name in ("scenarios", "continuations", "annotations", "references"):
        got, want = getattr(loaded, name), getattr(original, name)
        assert [_without_line(r) for r in got] == want, name
        assert all(dataclasses.asdict(_without_line(g)) == dataclasses.asdict(w) for g, w in zip(got, want))
    # unknown fields, nested and non-ASCII, survive; optional fields keep their values and defaults
    assert loaded.scenario_by_id["s1"].extra["difficulty"] == 3
    assert loaded.get("c3").extra["note"] == "é"
    assert loaded.annotations[-1].extra["conf"] == 0.4 and loaded.references[2].extra["checked_by"] == "lead"
    assert loaded.scenario_by_id["s2"].takeover_s == 0.0 and loaded.scenario_by_id["s2"].tags == []
    assert loaded.get("c2").takeover_s == 0.5 and loaded.get("c1").takeover_s is None
    assert loaded.takeover_of("c1") == 0.25 and loaded.takeover_of("c2") == 0.5
    assert loaded.annotations[4].marker_s is None and loaded.annotations[0].source == "human"
    assert loaded.annotations[8].source == "model"
    assert loaded.instruction_of("c3") == "pick up the blue key"


def test_written_json_has_no_internal_keys_and_rewrite_is_byte_identical(tmp_path):
    tiny_suite(tmp_path / "a", videos=False)
    Suite.load(tmp_path / "a").write(tmp_path / "b")  # loaded records carry `_line` in extra
    for name in (SC, CO, AN, RE):
        for obj in read_lines(tmp_path / "b" / name):
            assert not [k for k in obj if k.startswith("_")], (name, obj)
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    written = [json.loads((tmp_path / name / SUITE_FILE).read_text()) for name in ("a", "b")]
    assert written[1] == written[0]
    assert not list((tmp_path / "b").glob("*.tmp"))


def test_integer_numbers_load_as_floats(tmp_path):
    suite = tiny_suite(tmp_path / "a", videos=False)
    write_lines(tmp_path / "a" / AN, [{"continuation_id": "c1", "annotator_id": "h1", "outcome": "success",
                                       "marker_s": 1}])
    loaded = Suite.load(tmp_path / "a")
    assert isinstance(loaded.annotations[0].marker_s, float) and loaded.annotations[0].marker_s == 1.0
    assert isinstance(loaded.scenario_by_id["s1"].takeover_s, float)
    assert len(loaded.continuations) == len(suite.continuations)


def test_optional_files_are_optional_and_not_left_over(tmp_path):
    suite = tiny_suite(tmp_path / "a", videos=False)
    suite.annotations, suite.references = [], []
    suite.write()  # the same folder: the old optional files must not survive
    assert not (tmp_path / "a" / AN).exists() and not (tmp_path / "a" / RE).exists()
    loaded = Suite.load(tmp_path / "a")
    assert loaded.annotations == [] and loaded.references == []


def test_minimal_suite_from_a_few_lines_of_code(tmp_path):
    """Any team can write a suite without this package: plain JSON files."""
    root = tmp_path / "m"
    root.mkdir()
    (root / SUITE_FILE).write_text(json.dumps({"format": "autorater-suite", "format_version": 1, "name": "m",
                                               "version": "v0"}))
    write_lines(root / SC, [{"scenario_id": "a", "instruction": "open the door", "category": "open"}])
    write_lines(root / CO, [{"continuation_id": "x", "scenario_id": "a", "agent_id": "p", "video": "x.mp4"}])
    suite = Suite.load(root)
    assert suite.info.description == "" and suite.continuation_ids() == ["x"] and suite.takeover_of("x") == 0.0


# ----------------------------------------------------------------------------------------------
# Validation rules: one case each. An edit breaks the valid tiny suite in one place; the problems
# must name exactly the expected (file, line)s, say what is wrong (words) and carry a fix.


def _append(file, obj):
    def edit(root):
        lines = [json.dumps(o).encode() for o in read_lines(root / file)]
        write_lines(root / file, lines + [obj])
    return edit


def _set(file, line, drop=(), **fields):
    def edit(root):
        lines = read_lines(root / file)
        lines[line - 1].update(fields)
        for name in drop:
            del lines[line - 1][name]
        write_lines(root / file, lines)
    return edit


def _info(drop=(), **fields):
    def edit(root):
        obj = json.loads((root / SUITE_FILE).read_text())
        obj.update(fields)
        for name in drop:
            del obj[name]
        (root / SUITE_FILE).write_text(json.dumps(obj))
    return edit


NEW_SCENARIO = {"scenario_id": "s3", "instruction": "open the door", "category": "open"}
NEW_CONTINUATION = {"continuation_id": "c5", "scenario_id": "s1", "agent_id": "good", "video": "videos/c1.mp4"}
NEW_ANNOTATION = {"continuation_id": "c4", "annotator_id": "h3", "outcome": "failure"}
NEW_REFERENCE = {"continuation_id": "c4", "outcome": "failure"}
NEW = {SC: (NEW_SCENARIO, 3), CO: (NEW_CONTINUATION, 5), AN: (NEW_ANNOTATION, 12), RE: (NEW_REFERENCE, 4)}


def _new(file, drop=(), **fields):
    """Append a valid new record of ``file`` with ``fields`` changed and ``drop`` removed; returns (edit, line)."""
    obj, line = NEW[file]
    obj = {k: v for k, v in {**obj, **fields}.items() if k not in drop}
    return _append(file, obj), line


REQUIRED = {SC: ["scenario_id", "instruction", "category"],
            CO: ["continuation_id", "scenario_id", "agent_id", "video"],
            AN: ["continuation_id", "annotator_id", "outcome"], RE: ["continuation_id", "outcome"]}

CASES = []
for _file, _fields in REQUIRED.items():
    for _field in _fields:
        _edit, _line = _new(_file, drop=[_field])
        CASES.append(pytest.param(_edit, [(_file, _line)], ["missing required field", _field], _field,
                                  id=f"missing-{_file.split('.')[0]}-{_field}"))
for _field in ("format", "format_version", "name", "version"):
    CASES.append(pytest.param(_info(drop=[_field]), [(SUITE_FILE, None)], ["missing required field", _field],
                              _field, id=f"missing-suite-{_field}"))

_WRONG_TYPES = [  # (file, field, value, words[, fix])
    (SC, "scenario_id", 3, "a string"), (SC, "instruction", ["go"], "a string"), (SC, "takeover_s", "0.5", "number"),
    (SC, "takeover_s", True, "number"), (SC, "takeover_s", None, "number"), (SC, "tags", "v1", "a list"),
    (SC, "tags", [1, "v1"], "list of strings", "quote each tag"), (SC, "metadata", [], "an object"),
    (CO, "agent_id", 7, "a string"), (CO, "takeover_s", "1", "number"), (CO, "metadata", "x", "an object"),
    (AN, "marker_s", "0.5", "number"), (AN, "marker_s", True, "number"), (AN, "outcome", True, "a string"),
    (AN, "failure_mode", 3, "a string"), (AN, "source", None, "a string"),
    (RE, "marker_s", False, "number"), (RE, "marker_s", [0.5], "number"),
]
for _file, _field, _value, _words, *_fix in _WRONG_TYPES:
    _edit, _line = _new(_file, **{_field: _value})
    CASES.append(pytest.param(_edit, [(_file, _line)], [_field, _words], _fix[0] if _fix else f"write '{_field}'",
                              id=f"type-{_file.split('.')[0]}-{_field}-{json.dumps(_value)}"))
for _value in ("1", True, 1.0):
    CASES.append(pytest.param(_info(format_version=_value), [(SUITE_FILE, None)], ["format_version", "integer"],
                              "format_version", id=f"type-suite-format_version-{json.dumps(_value)}"))
CASES += [
    pytest.param(_info(name=None), [(SUITE_FILE, None)], ["name", "a string"], "name", id="type-suite-name-null"),
    # non-finite numbers (Python's json reads these tokens; the format does not allow them)
    pytest.param(_append(AN, b'{"continuation_id": "c1", "annotator_id": "h4", "outcome": "success", '
                             b'"marker_s": NaN}'),
                 [(AN, 12)], ["marker_s", "finite"], "finite", id="nonfinite-annotation-nan"),
    pytest.param(_append(RE, b'{"continuation_id": "c4", "outcome": "failure", "marker_s": Infinity}'),
                 [(RE, 4)], ["marker_s", "finite"], "finite", id="nonfinite-reference-inf"),
    pytest.param(_append(SC, b'{"scenario_id": "s3", "instruction": "open", "category": "open", '
                             b'"takeover_s": -Infinity}'),
                 [(SC, 3)], ["takeover_s", "finite"], "finite", id="nonfinite-scenario-takeover"),
    pytest.param(_append(CO, b'{"continuation_id": "c5", "scenario_id": "s2", "agent_id": "bad", '
                             b'"video": "videos/c4.mp4", "takeover_s": NaN}'),
                 [(CO, 5)], ["takeover_s", "finite"], "finite", id="nonfinite-continuation-takeover"),
    # broken lines
    pytest.param(_append(SC, b'{"scenario_id": "s3", "instruction": "x"'), [(SC, 3)], ["invalid json"], "json",
                 id="bad-json"),
    pytest.param(_append(AN, b'{"continuation_id": "c1", "annotator_id": "h\xff", "outcome": "success"}'),
                 [(AN, 12)], ["utf-8"], "utf-8", id="not-utf8"),
    pytest.param(_append(CO, [1, 2]), [(CO, 5)], ["json object", "list"], "object", id="not-an-object-list"),
    pytest.param(_append(RE, "c1"), [(RE, 4)], ["json object", "str"], "object", id="not-an-object-string"),
    # ids
    pytest.param(_append(SC, NEW_SCENARIO | {"scenario_id": "s1"}), [(SC, 3)],
                 ["duplicate scenario_id", "'s1'", "first on line 1"], "own id", id="duplicate-scenario"),
    pytest.param(_append(CO, NEW_CONTINUATION | {"continuation_id": "c2"}), [(CO, 5)],
                 ["duplicate continuation_id", "'c2'", "first on line 2"], "own id", id="duplicate-continuation"),
    pytest.param(_append(RE, NEW_REFERENCE | {"continuation_id": "c1"}), [(RE, 4)],
                 ["duplicate continuation_id", "'c1'", "first on line 1"], "own id", id="duplicate-reference"),
    pytest.param(_new(CO, scenario_id="s9")[0], [(CO, 5)], ["unknown scenario_id", "'s9'"], SC,
                 id="unknown-scenario"),
    pytest.param(_new(AN, continuation_id="c9")[0], [(AN, 12)], ["unknown continuation_id", "'c9'"], CO,
                 id="unknown-continuation-annotation"),
    pytest.param(_new(RE, continuation_id="c9")[0], [(RE, 4)], ["unknown continuation_id", "'c9'"], CO,
                 id="unknown-continuation-reference"),
    # values
    pytest.param(_new(AN, outcome="maybe")[0], [(AN, 12)], ["outcome", "'maybe'"], '"success" or "failure"',
                 id="outcome-annotation"),
    pytest.param(_new(AN, outcome="Success")[0], [(AN, 12)], ["outcome", "'Success'"], '"success" or "failure"',
                 id="outcome-case"),
    pytest.param(_new(RE, outcome="passed")[0], [(RE, 4)], ["outcome", "'passed'"], '"success" or "failure"',
                 id="outcome-reference"),
    pytest.param(_set(AN, 2, marker_s=-0.5), [(AN, 2)], ["marker_s", "negative"], ">= 0", id="negative-marker"),
    pytest.param(_set(RE, 1, marker_s=-1), [(RE, 1)], ["marker_s", "negative"], ">= 0",
                 id="negative-reference-marker"),
    pytest.param(_set(SC, 1, takeover_s=-0.25), [(SC, 1)], ["takeover_s", "negative"], ">= 0",
                 id="negative-takeover-scenario"),
    pytest.param(_set(CO, 2, takeover_s=-1.0), [(CO, 2)], ["takeover_s", "negative"], ">= 0",
                 id="negative-takeover-continuation"),
    pytest.param(_set(SC, 2, instruction=""), [(SC, 2)], ["empty instruction", "'s2'"], "instruction",
                 id="empty-instruction"),
    pytest.param(_set(SC, 2, instruction="  \t"), [(SC, 2)], ["empty instruction"], "instruction",
                 id="blank-instruction"),
]
for _path in ("../x.mp4", "/tmp/x.mp4", "videos/../../x.mp4", "C:/videos/x.mp4", "videos\\c1.mp4", ""):
    CASES.append(pytest.param(_set(CO, 3, video=_path), [(CO, 3)], ["video path", "leaves the suite"], "relative",
                              id=f"path-{_path or 'empty'}"))
CASES += [
    pytest.param(_info(format="autorater_suite"), [(SUITE_FILE, None)], ["format", "autorater_suite"],
                 '"format": "autorater-suite"', id="wrong-format"),
    pytest.param(_info(format_version=2), [(SUITE_FILE, None)], ["format_version 2", "not supported"],
                 "format_version 1", id="unsupported-format-version"),
    pytest.param(lambda root: (root / SUITE_FILE).write_text("{not json"), [(SUITE_FILE, None)], ["json"],
                 "json object", id="suite-json-not-json"),
    pytest.param(lambda root: (root / SUITE_FILE).unlink(), [(SUITE_FILE, None)], ["missing"], "format_version",
                 id="missing-suite-json"),
    # videos
    pytest.param(lambda root: (root / "videos/c2.mp4").unlink(), [(CO, 2)], ["'c2'", "not found", "c2.mp4"],
                 "video", id="missing-video"),
    pytest.param(lambda root: (root / "videos/c3.mp4").write_text("this is not a video\n"), [(CO, 3)],
                 ["'c3'", "cannot decode", "c3.mp4"], "re-export", id="undecodable-video"),
    pytest.param(lambda root: (root / "videos/c4.mp4").write_bytes(b""), [(CO, 4)], ["'c4'", "empty", "c4.mp4"],
                 "re-export", id="empty-video"),
    pytest.param(_new(AN, continuation_id="c1", marker_s=DURATION_S + 0.5)[0], [(AN, 12)],
                 ["marker_s 1.500", "after the end", "c1.mp4", "1.000 s"], "marked at the end",
                 id="marker-after-end-annotation"),
    pytest.param(_set(RE, 3, marker_s=2.0), [(RE, 3)], ["marker_s 2.000", "after the end", "c3.mp4"],
                 "seconds from the first frame", id="marker-after-end-reference"),
    pytest.param(_set(CO, 2, takeover_s=2.0), [(CO, 2)], ["takeover at 2.000 s", "after the end", "1.000 s"],
                 "takeover_s", id="takeover-after-end-continuation"),
    pytest.param(_set(SC, 2, takeover_s=1.5), [(CO, 3), (CO, 4)], ["takeover at 1.500 s", "after the end"],
                 "takeover_s", id="takeover-after-end-scenario"),
]


def test_the_valid_suite_has_no_problems(suite_dir):
    assert validate_suite(suite_dir) == []


@pytest.mark.parametrize("edit, where, words, fix", CASES)
def test_each_rule_names_file_line_and_fix(suite_dir, edit, where, words, fix):
    edit(suite_dir)
    problems = validate_suite(suite_dir, check_videos=True)
    assert sorted(((p.file, p.line) for p in problems), key=str) == sorted(where, key=str), \
        "\n".join(map(str, problems))
    for p in problems:
        text = str(p).lower()
        for word in words:
            assert word.lower() in text, (word, str(p))
        assert fix.lower() in p.fix.lower(), (fix, p.fix)
        assert str(p).startswith(f"{p.file}:{p.line}: " if p.line else f"{p.file}: ")


def test_a_continuation_overriding_takeover_is_checked_against_its_own_value(suite_dir):
    """c2 overrides the scenario's takeover: a late scenario takeover does not concern it."""
    _set(SC, 1, takeover_s=1.5)(suite_dir)
    problems = validate_suite(suite_dir)
    assert [(p.file, p.line) for p in problems] == [(CO, 1)]


def test_markers_at_the_very_end_are_valid(suite_dir):
    """A timeout is marked at the end of the video: marker_s == n / fps is allowed."""
    _set(AN, 2, marker_s=DURATION_S)(suite_dir)
    _set(SC, 2, takeover_s=DURATION_S)(suite_dir)
    assert validate_suite(suite_dir) == []


def test_bad_paths_do_not_stop_other_video_checks(suite_dir):
    _set(CO, 1, video="../c1.mp4")(suite_dir)
    (suite_dir / "videos/c4.mp4").unlink()
    problems = validate_suite(suite_dir)
    assert sorted((p.file, p.line) for p in problems) == [(CO, 1), (CO, 4)]


def test_videos_are_checked_even_without_suite_json(suite_dir):
    (suite_dir / SUITE_FILE).unlink()
    (suite_dir / "videos/c2.mp4").unlink()
    assert sorted(((p.file, p.line) for p in validate_suite(suite_dir)), key=str) == [(CO, 2), (SUITE_FILE, None)]


def test_no_video_check_skips_videos(suite_dir):
    shutil.rmtree(suite_dir / "videos")
    assert validate_suite(suite_dir, check_videos=False) == []
    assert len(validate_suite(suite_dir, check_videos=True)) == 4


def test_a_missing_file_is_reported_once_and_its_dependents_after_it(suite_dir):
    (suite_dir / SC).unlink()
    problems = validate_suite(suite_dir)
    assert (problems[0].file, problems[0].line) == (SC, None) and "cannot read" in problems[0].message
    assert problems[0].fix
    assert [(p.file, p.line) for p in problems[1:]] == [(CO, i) for i in range(1, 5)]  # unknown scenario ids


def test_missing_folder_is_one_problem(tmp_path):
    problems = validate_suite(tmp_path / "nope")
    assert len(problems) == 1 and "does not exist" in problems[0].message and problems[0].fix


# ----------------------------------------------------------------------------------------------
# Everything is reported at once


def test_cli_validate_reports_all_problems(suite_dir, capsys):
    _append(SC, b'{"scenario_id": "s3", "instruction": ')(suite_dir)           # broken line
    _new(CO, scenario_id="s9")[0](suite_dir)                                   # unknown scenario
    (suite_dir / "videos/c2.mp4").unlink()                                     # missing video
    rc = main(["suite", "validate", str(suite_dir), "--quiet"])
    err = capsys.readouterr().err
    assert rc != 0
    assert f"{SC}:3: invalid JSON" in err
    assert f"{CO}:5: unknown scenario_id 's9'" in err
    assert f"{CO}:2:" in err and "c2.mp4" in err and "not found" in err
    assert "3 problem(s)" in err


def test_cli_validate_accepts_a_valid_suite(suite_dir, capsys):
    assert main(["suite", "validate", str(suite_dir), "--quiet"]) == 0
    assert "OK" in capsys.readouterr().out


def test_load_raises_with_every_problem_listed(suite_dir):
    _new(AN, outcome="maybe")[0](suite_dir)
    _set(SC, 2, instruction="")(suite_dir)
    with pytest.raises(SuiteFormatError) as info:
        Suite.load(suite_dir)
    err = info.value
    assert isinstance(err, ValueError) and len(err.problems) == 2
    message = str(err)
    assert "2 problem(s)" in message and str(suite_dir) in message
    assert f"{AN}:12: outcome 'maybe'" in message and f"{SC}:2:" in message and "empty instruction" in message


def test_load_checks_videos_only_when_asked(suite_dir):
    (suite_dir / "videos/c1.mp4").unlink()
    assert Suite.load(suite_dir).continuation_ids() == ["c1", "c2", "c3", "c4"]
    with pytest.raises(SuiteFormatError, match="c1.mp4"):
        Suite.load(suite_dir, check_videos=True)


def test_get_unknown_id_raises_key_error_naming_it(suite_dir):
    suite = Suite.load(suite_dir)
    assert suite.get("c2").agent_id == "bad"
    with pytest.raises(KeyError, match="'nope'"):
        suite.get("nope")
    assert suite.video_path("c1") == suite_dir / "videos" / "c1.mp4"
    assert suite.scenario_of("c4").scenario_id == "s2"


def test_in_memory_records_build_a_valid_suite(tmp_path):
    """Writing from records of any team's code (ints for floats, defaults left out) gives a valid suite."""
    suite = Suite(tmp_path, SuiteInfo("x", "v1"), [Scenario("a", "go", "goto")],
                  [Continuation("x1", "a", "p", "videos/x1.mp4")],
                  [Annotation("x1", "h", "failure")], [Reference("x1", "failure", 0)])
    suite.write()
    assert [p for p in validate_suite(tmp_path, check_videos=False)] == []
