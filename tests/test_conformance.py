"""One conformance suite over every registry, as scikit-learn runs one over every estimator
(``parametrize_with_checks``): each registered architecture (its tiniest preset), model part, frame-encoder family,
world, stratum key and CLI command that builds a model goes through the same checks at tiny sizes: it builds, saves
and reloads bit for bit, rates a tiny suite, trains one step, refuses bad input with a one-line error. The cases are
read from the registries when the tests are collected, so a new registration is checked without writing a test."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from autorater.app.cli import build_parser
from autorater.data.suite import validate_suite
from autorater.data.worlds import WORLDS, load_world, option_infos, world_of
from autorater.device import DEFAULT_DEVICE
from autorater.encoders import FRAME_ENCODERS, create_frame_encoder
from autorater.model import ModelPart
from autorater.models import ARCHITECTURES, AutoConfig, AutoModel
from autorater.rater import Rater
from autorater.serving.labelling.strata import STRATUM_FIELDS, parse_strata, strata_help, stratum_fields, stratum_key
from autorater.training.plan import STAGES
from autorater.training.recipe import TrainConfig, recipe_for
from autorater.training.train import train
from model_suites import learnable_suite, one_thread


def tiniest(spec):
    """A spec's cheapest preset (the fewest pixels a clip decodes: its tiny one, the registry's test size), with the
    words and failure modes training would learn."""
    config = min(spec.presets.values(), key=lambda c: c.clip_frames * c.decoded_size() ** 2)
    learned = {"vocab": ["go", "to", "the", "red", "blue", "ball"]} if spec.learns_words(config) else {}
    return config.replace(failure_modes=["timeout"], **learned)


def fixed_inputs(config, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    size, frames = config.decoded_size(), min(config.clip_frames, 8)
    return {"frames": torch.randint(0, 256, (2, frames, size, size, 3), dtype=torch.uint8, generator=g),
            "times_s": torch.arange(frames).float().repeat(2, 1) / 8, "takeover_s": torch.tensor([0.0, 0.25]),
            "instructions": ["go to the red ball", "go to the blue ball"]}


def one_line_error(excinfo, *names: str) -> None:
    message = str(excinfo.value)
    assert "\n" not in message and all(name in message for name in names), message


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    before = one_thread()
    root = tmp_path_factory.mktemp("conformance")
    yield {"root": root, "suite": learnable_suite(root / "suite", n_scenarios=4, per_scenario=2)}
    torch.set_num_threads(before)


def short(config, cache_dir, **changes):
    return recipe_for(config, epochs=1, val_share=0.25, cache_dir=str(cache_dir), stream={"match_warmup_epochs": 1},
                      outcome={"steps": 2}, **changes)


# -- architectures ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_an_architecture_builds_saves_reloads_bit_for_bit_and_rates_a_tiny_suite(name, tiny, tmp_path):
    config = tiniest(ARCHITECTURES[name])
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    assert type(loaded) is type(model) and loaded.config == config
    mine, theirs = model.trainable_state_dict(), loaded.trainable_state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    with torch.no_grad():
        assert torch.equal(model(**fixed_inputs(config)).success_logit, loaded(**fixed_inputs(config)).success_logit)
    rows = list(Rater(loaded).rate_suite(tiny["suite"]))
    assert [r["continuation_id"] for r in rows] == tiny["suite"].continuation_ids()
    assert all(0.0 <= r["p_success"] <= 1.0 for r in rows)


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_an_architecture_trains_one_step_by_its_recipe(name, tiny):
    config = tiniest(ARCHITECTURES[name])
    result = train([tiny["suite"]], config, short(config, tiny["root"] / "cache"))
    assert result.history and all(np.isfinite(h["train_loss"]) for h in result.history if "train_loss" in h)
    fresh = AutoModel.from_config(result.model.config).trainable_state_dict()
    assert any(not torch.equal(v, fresh[k]) for k, v in result.model.trainable_state_dict().items())


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_an_architecture_refuses_a_bad_config_with_a_one_line_error(name):
    config = tiniest(ARCHITECTURES[name]).to_dict()
    with pytest.raises(ValueError) as bad:
        AutoConfig.from_dict({**config, "clip_frames": 0})
    one_line_error(bad, "clip_frames")
    with pytest.raises(ValueError) as unknown:
        AutoConfig.from_dict({**config, "no_such_field": 1})
    one_line_error(unknown, "no_such_field")


# -- parts ----------------------------------------------------------------------------------------------------------

def _part_classes() -> list[type]:
    found, todo = [], list(ModelPart.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted(found, key=lambda c: c.__name__)


def _model_with(part_class) -> tuple:
    """A tiny model of a registered architecture with a part of this class, and the part's name in it."""
    for spec in ARCHITECTURES.values():
        config = tiniest(spec)
        torch.manual_seed(0)
        model = AutoModel.from_config(config)
        names = [n for n, p in model.parts().items() if type(p) is part_class]
        if names:
            return config, model, names[0]
    pytest.skip(f"no registered architecture's tiny model has a {part_class.__name__}")


@pytest.mark.parametrize("part_class", _part_classes(), ids=lambda c: c.__name__)
def test_a_part_names_a_registered_stage_whose_recipe_is_a_field_of_train_config(part_class):
    assert part_class.stage in STAGES, f"{part_class.__name__}: register its stage in autorater.training.plan.STAGES"
    stage = STAGES[part_class.stage]
    assert stage.name == part_class.stage and dataclasses.is_dataclass(getattr(TrainConfig(), stage.name))
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()  # the stage's recipe round-trips


@pytest.mark.parametrize("part_class", _part_classes(), ids=lambda c: c.__name__)
def test_a_part_trains_one_step_through_its_stage(part_class, tiny):
    config, model, name = _model_with(part_class)
    before = {k: v.clone() for k, v in model.parts()[name].state_dict().items()}
    alone = STAGES[part_class.stage](None, name).alone()
    result = train([tiny["suite"]], config, short(config, tiny["root"] / "cache", parts_apart=alone))
    after = result.model.parts()[name].state_dict()
    assert any(not torch.equal(after[k], v) for k, v in before.items() if k in after)
    if alone:  # trained alone first: the rest of the model builds without it
        assert name not in model.without(name).parts()
    else:
        with pytest.raises(ValueError) as kept:
            model.without(name)
        one_line_error(kept, name)


# -- frame-encoder families -----------------------------------------------------------------------------------------

def _config_for(encoder: str):
    """A tiny config of a registered architecture that reads frames through ``encoder``."""
    spec = FRAME_ENCODERS[encoder]
    for arch in ARCHITECTURES.values():
        config = tiniest(arch)
        if hasattr(config, "encoder"):
            stages = [s.index for s in spec.stage_map()]
            stage = {} if not stages or config.encoder_stage in stages else {"encoder_stage": stages[0]}
            try:
                candidate = config.replace(encoder=encoder, **stage)
                AutoModel.from_config(candidate)
                return candidate
            except ValueError:
                continue
    pytest.skip(f"no registered architecture reads encoder {encoder!r}")


@pytest.mark.parametrize("encoder", sorted(FRAME_ENCODERS))
def test_an_encoder_family_builds_encodes_and_reloads_bit_for_bit_in_a_model(encoder, tmp_path):
    config = _config_for(encoder)
    frame_encoder = create_frame_encoder(config)
    clip = torch.randint(0, 256, (1, 2, config.image_size, config.image_size, 3), dtype=torch.uint8)
    with torch.no_grad():
        features = frame_encoder(clip)
    assert features.shape[:2] == (1, 2) and features.shape[2] == frame_encoder.out_channels
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = AutoModel.from_pretrained(tmp_path / "m")
    with torch.no_grad():
        assert torch.equal(model(**fixed_inputs(config)).success_logit, loaded(**fixed_inputs(config)).success_logit)


@pytest.mark.parametrize("encoder", sorted(FRAME_ENCODERS))
def test_an_encoder_family_refuses_a_stage_it_lacks_with_a_one_line_error(encoder):
    config = _config_for(encoder)
    with pytest.raises(ValueError) as bad:
        create_frame_encoder(config, stage=99, trainable_blocks=1)
    one_line_error(bad)


# -- worlds ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(WORLDS))
def test_a_world_generates_a_tiny_valid_suite_that_names_it(name, tmp_path):
    from autorater.data.generate import generate_suite

    world = load_world(name)
    assert set(world.DEFAULT_AGENTS) <= set(world.AGENTS) and world.resolve_tasks(world.DEFAULT_TASKS)
    folder = generate_suite(tmp_path / "s", world=name, tasks=world.DEFAULT_TASKS[:1], scenarios=1,
                            continuations_per_scenario=2, annotators=2, workers=1, progress=False)
    from autorater.data.suite import Suite

    assert validate_suite(folder) == [] and world_of(Suite.load(folder).info.source) == name


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_a_world_refuses_a_bad_option_or_task_with_a_one_line_error(name):
    from autorater.data.worlds import options_of

    world = load_world(name)
    with pytest.raises(ValueError) as task:
        world.resolve_tasks(["no-such-task"])
    one_line_error(task, "no-such-task")
    bounded = [info for info in option_infos(world.OPTIONS) if info.low is not None and info.kind is int]
    with pytest.raises(ValueError) as option:
        if bounded:
            options_of(world, {bounded[0].name: int(bounded[0].low) - 1})
        else:
            options_of(world, {"no_such_option": 1})
    one_line_error(option, bounded[0].name if bounded else "no_such_option")


# -- stratum keys ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [*STRATUM_FIELDS, "tag:room"])
def test_a_stratum_key_cuts_every_continuation_and_its_help_says_what_it_is(key, tiny):
    suite = tiny["suite"]
    assert parse_strata(key) == (key,) and key.split(":")[0] in strata_help()
    keys = [stratum_key(stratum_fields(suite, c), (key,), known_agents=set()) for c in suite.continuation_ids()]
    assert len(keys) == len(suite.continuations) and all(isinstance(k, str) and k for k in keys)
    wrong = "tag:" if key.startswith("tag:") else f"{key}x"  # a tag with no name; a key that is none of them
    with pytest.raises(ValueError) as bad:
        parse_strata(wrong)
    one_line_error(bad, wrong)


# -- CLI commands that build a model --------------------------------------------------------------------------------

def _commands(parser=None, path=()) -> dict:
    """Every subcommand of the CLI by its words (``("active", "select")``) -> its parser."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if not subs:
        return {path: parser}
    return {k: v for name, sub in subs[0].choices.items() for k, v in _commands(sub, (*path, name)).items()}


def _builds_model(parser) -> bool:
    """A command builds or loads a model when it names a model folder, a recipe or a pack, or says so (the demo)."""
    flags = {o for a in parser._actions for o in a.option_strings}
    return bool(flags & {"--model", "--config", "--from-pack"}) or parser.get_default("builds_model") is True


MODEL_COMMANDS = sorted(words for words, parser in _commands().items() if _builds_model(parser))


@pytest.mark.parametrize("command", MODEL_COMMANDS, ids=" ".join)
def test_every_command_that_builds_a_model_takes_device_with_the_one_default(command):
    parser = _commands()[command]
    device = next((a for a in parser._actions if "--device" in a.option_strings), None)
    assert device is not None, f"autorater {' '.join(command)} has no --device"
    assert device.default == DEFAULT_DEVICE == "auto"


def test_the_commands_that_build_a_model_are_found_not_listed():
    assert {("train",), ("pack",), ("predict",), ("demo",), ("active", "round")} <= set(MODEL_COMMANDS)
    assert ("suite", "validate") not in MODEL_COMMANDS
