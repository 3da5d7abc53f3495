"""Suite versions as a team keeps them: ``suite diff`` finds every change and says whether there is one, ``suite tag``
writes tags safely (a --where language that is never evaluated as Python; locked, atomic, idempotent), and the version
a scenario came in is a tag the generator and the import write."""

from __future__ import annotations

import json
import shutil
import threading

import pytest

from autorater.app import cli
from autorater.data.diff import diff_suites, format_diff
from autorater.data.suite import Annotation, Continuation, Reference, Scenario, Suite
from autorater.data.versions import check_tag, next_version, scenario_version, version_key, with_version_tag
from autorater.data.where import WhereError, parse_where, scenario_fields
from autorater.serving.analysis.tags import stamp_version, tag_suite
from tiny_suites import FPS, frames, read_lines, tiny_suite

SCENARIO = {"category": "pick_up", "instruction": "Pick up the RED key", "scenario_id": "s0012",
            "tags": ["version:v2", "hard"]}


@pytest.mark.parametrize("expression, expected", [
    ('category == "pick_up"', True), ("category != pick_up", False), ("category in [go_to, pick_up]", True),
    ("category in (go_to, open)", False), ("instruction contains red", True), ("scenario_id startswith s00", True),
    ('tags has "version:v2"', True), ('"hard" in tags', True), ("tags has easy", False),
    ("not tags has easy and (category == open or instruction contains key)", True),
    ("category == open or category == pick_up and tags has hard", True),  # and binds tighter than or
    ("not not category == pick_up", True), ("instruction == 'Pick up the RED key'", True),
])
def test_the_where_language_reads_fields_operators_and_precedence(expression, expected):
    assert parse_where(expression)(SCENARIO) is expected


@pytest.mark.parametrize("expression, says", [
    ("", "empty"), ("foo == 1", "unknown field 'foo'"), ("category ==", "expected a value"),
    ("category has x", "one string"), ("tags == x", "tags is a list"), ("category == a b", "unexpected 'b'"),
    ('__import__("os").system("true")', "expected"), ("category == 'a", "unexpected character"),
    ("(category == a", "expected ')'"), ("category in [a,", "expected a value"), ("x" * 3000, "longer than"),
])
def test_a_broken_expression_points_at_the_place_and_names_the_fix(expression, says):
    with pytest.raises(WhereError, match="fix:") as err:
        parse_where(expression)
    assert says in str(err.value)


def test_the_where_language_never_evaluates_python(monkeypatch):
    import builtins

    monkeypatch.setattr(builtins, "eval", lambda *a, **k: pytest.fail("eval was called"))
    with pytest.raises(WhereError):
        parse_where("__import__('os').system('touch /tmp/pwned')")
    assert parse_where("instruction contains \"__import__('os')\"")({"instruction": "__import__('os')"})


def test_version_tags_sort_and_count_as_people_number_them():
    assert scenario_version(["GoToLocal", "version:v2", "version:v3"]) == "v2"
    assert scenario_version(["v2"], default="v1") == "v1"
    assert with_version_tag(["a"], "v2") == ["a", "version:v2"] and with_version_tag(["version:v1"], "v2") == \
        ["version:v1"]
    assert sorted(["v10", "v2", "v1", "v2b"], key=version_key) == ["v1", "v2", "v2b", "v10"]
    assert next_version(["v1", "v9", "v10"]) == "v11" and next_version(["draft"]) == "v1"
    for bad in ("", " x", "a,b", "a\nb", "x" * 300):
        with pytest.raises(ValueError, match="fix:"):
            check_tag(bad)


@pytest.fixture
def two_versions(tmp_path):
    """v1 (the tiny suite) and v2: one scenario added, one changed (instruction and tags), one video re-recorded,
    one continuation removed, one label changed, one gold reference changed."""
    old = tiny_suite(tmp_path / "v1")
    shutil.copytree(old.root, tmp_path / "v2")
    new = Suite.load(tmp_path / "v2")
    new.info.version = "v2"
    new.scenario_by_id["s1"].instruction = "go to the red box"
    new.scenario_by_id["s1"].tags = ["v1", "hard"]
    new.scenarios.append(Scenario("s3", "open the door", "open", tags=["version:v2"]))
    new.continuations = [c for c in new.continuations if c.continuation_id != "c4"]
    new.continuations.append(Continuation("c5", "s3", "good", "videos/c5.mp4"))
    new.annotations = [a for a in new.annotations if a.continuation_id != "c4"]
    new.annotations[0] = Annotation("c1", "h1", "failure", 0.5)
    new.references[0] = Reference("c1", "failure", 0.5)
    new.write()
    from autorater.data.video import write_video

    write_video(new.root / "videos/c5.mp4", frames(seed=5), fps=FPS)
    write_video(new.root / "videos/c3.mp4", frames(seed=9), fps=FPS)  # same path, another recording
    return old, Suite.load(new.root)


def test_diff_finds_every_change_and_counts_it_per_category_and_tag(two_versions):
    old, new = two_versions
    diff = diff_suites(old, new)
    assert diff.differ and diff.old == "tiny@v1" and diff.new == "tiny@v2"
    assert diff.scenarios_added == ["s3"] and diff.scenarios_removed == [] and diff.scenarios_unchanged == 0
    assert set(diff.scenarios_changed["s1"]) == {"instruction", "tags"}
    assert diff.scenarios_changed["s1"]["tags"]["added"] == ["hard"]
    assert diff.scenarios_changed["s1"]["tags"]["removed"] == ["local"]
    assert diff.scenarios_changed["s2"] == {"videos": {"added": 1, "removed": 2}}  # c3 re-recorded, c4 gone
    assert diff.continuations_added == ["c5"] and diff.continuations_removed == ["c4"]
    assert set(diff.continuations_changed) == {"c3"} and "video" in diff.continuations_changed["c3"]
    assert diff.labels_changed == {"c1": {"added": 1, "removed": 1}}
    assert diff.references_changed["c1"]["new"]["outcome"] == "failure"
    assert diff.by_category["open"]["scenarios_added"] == 1 and diff.by_category["pickup"]["continuations_removed"] == 1
    assert diff.by_tag["hard"]["scenarios_changed"] == 1 and diff.by_tag["version:v2"]["continuations_added"] == 1
    text = format_diff(diff)
    assert "1 added, 0 removed, 2 changed" in text and "instruction 'go to the red ball' -> 'go to the red box'" in text
    assert diff_suites(old, new, videos=False).continuations_changed == {}  # by path, c3 looks the same
    assert not diff_suites(old, Suite.load(old.root)).differ


def test_cli_diff_exit_code_says_whether_they_differ_and_writes_json(two_versions, tmp_path, capsys):
    old, new = two_versions
    assert cli.main(["suite", "diff", str(old.root), str(old.root)]) == 0
    assert "the suites are the same" in capsys.readouterr().out
    assert cli.main(["suite", "diff", str(old.root), str(new.root), "--json", "--out", str(tmp_path / "d.json")]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "d.json").read_text()) and printed["differ"] is True


def test_a_diff_of_unrelated_suites_is_a_clear_error_unless_forced(two_versions, capsys):
    old, new = two_versions
    new.info.name = "another-suite"
    new.write()
    assert cli.main(["suite", "diff", str(old.root), str(new.root)]) == 2
    err = capsys.readouterr().err
    assert "'tiny'" in err and "'another-suite'" in err and "--force" in err
    assert cli.main(["suite", "diff", str(old.root), str(new.root), "--force"]) == 1


def test_tagging_by_expression_is_idempotent_keeps_unknown_fields_and_reloads(tmp_path, capsys):
    suite = tiny_suite(tmp_path / "s", videos=False)
    before = read_lines(suite.root / "scenarios.jsonl")
    assert cli.main(["suite", "tag", str(suite.root), "--tag", "hard", "--where", "category == goto"]) == 0
    assert "added to 1 scenario(s)" in capsys.readouterr().out
    after = read_lines(suite.root / "scenarios.jsonl")
    assert after[0]["tags"] == ["v1", "local", "hard"] and after[0]["difficulty"] == 3  # an unknown field kept
    assert after[1] == before[1]
    again = tag_suite(suite.root, "hard", where="category == goto")
    assert again.changed == [] and again.already == 1 and read_lines(suite.root / "scenarios.jsonl") == after
    removed = tag_suite(suite.root, "hard", where="tags has hard", remove=True)
    assert removed.changed == ["s1"] and read_lines(suite.root / "scenarios.jsonl") == before


def test_tagging_by_a_file_of_ids_names_an_unknown_id_with_its_line(tmp_path):
    suite = tiny_suite(tmp_path / "s", videos=False)
    ids = tmp_path / "ids.txt"
    ids.write_text("# chosen by hand\ns2\n\n{\"scenario_id\": \"s1\"}\n")
    assert tag_suite(suite.root, "mine", scenarios_file=ids).changed == ["s2", "s1"]
    ids.write_text("s1\ns9\n")
    with pytest.raises(ValueError, match=r"ids.txt:2: unknown scenario_id 's9'.*fix:"):
        tag_suite(suite.root, "other", scenarios_file=ids)
    assert all("other" not in s.tags for s in Suite.load(suite.root).scenarios)  # nothing written
    with pytest.raises(ValueError, match="matches none"):
        tag_suite(suite.root, "x", where="category == nothing")
    with pytest.raises(ValueError, match="comma"):
        tag_suite(suite.root, "a,b", where="category == goto")
    with pytest.raises(ValueError, match="one of them"):
        tag_suite(suite.root, "x")


def test_tagging_waits_for_the_suites_lock(tmp_path):
    from autorater.serving.labelling.folder import folder_lock

    suite = tiny_suite(tmp_path / "s", videos=False)
    done = threading.Event()
    with folder_lock(suite.root, "a test writer"):
        worker = threading.Thread(target=lambda: (tag_suite(suite.root, "t", where="category == goto"), done.set()))
        worker.start()
        assert not done.wait(0.3)  # blocked while another writer holds the suite
    worker.join(10)
    assert done.is_set() and "t" in Suite.load(suite.root).scenario_by_id["s1"].tags


def test_stamping_versions_tags_only_scenarios_without_one(tmp_path):
    suite = tiny_suite(tmp_path / "s", videos=False)
    suite.scenarios[0].tags.append("version:v0")
    suite.write()
    assert stamp_version(suite.root) == ["s2"]
    assert [scenario_version(s.tags) for s in Suite.load(suite.root).scenarios] == ["v0", "v1"]
    assert stamp_version(suite.root, "v2") == []


def test_the_generator_tags_versions_and_grows_an_earlier_version(tmp_path):
    from autorater.data.generate import generate_suite

    kw = dict(continuations_per_scenario=2, workers=1, image_size=32, progress=False)
    v1 = Suite.load(generate_suite(tmp_path / "v1", scenarios=2, **kw))
    v2 = Suite.load(generate_suite(tmp_path / "v2", scenarios=2, version="v2", grow=tmp_path / "v1", seed=1, **kw))
    assert [scenario_version(s.tags) for s in v2.scenarios] == ["v1", "v1", "v2", "v2"]
    assert [s.scenario_id for s in v2.scenarios] == ["s0000", "s0001", "s0002", "s0003"]
    assert v2.info.name == v1.info.name and v2.info.source["grown_from"]["version"] == "v1"
    diff = diff_suites(v1, v2)
    assert diff.scenarios_added == ["s0002", "s0003"] and diff.scenarios_unchanged == 2
    assert not (diff.scenarios_changed or diff.continuations_changed or diff.labels_changed)
    assert len({t["continuation_id"] for t in read_lines(v2.root / "simulator_truth.jsonl")}) == 8


def test_scenario_fields_are_what_an_expression_sees():
    s = Scenario("s1", "go", "goto", tags=["a"])
    assert parse_where("tags has a and scenario_id == s1")(scenario_fields(s))
