"""The quality benchmark's recipe-variant options: --set / --train-set FIELD=VALUE."""

import pytest

from autorater.config import PRESETS, AutoraterConfig
from benchmarks.quality import parse_overrides
from training.train import TrainConfig


def test_set_takes_json_values_and_bare_strings():
    got = parse_overrides(["image_size=112", "text_encoder=bow", "cell_verify=true", 'encoder="tiny_cnn"'],
                          AutoraterConfig)
    assert got == {"image_size": 112, "text_encoder": "bow", "cell_verify": True, "encoder": "tiny_cnn"}
    assert PRESETS["base"].replace(**got).image_size == 112


def test_train_set_checks_train_config_fields_and_widens_ints_to_floats():
    got = parse_overrides(["rotate=false", "lr=1"], TrainConfig, "--train-set")
    assert got == {"rotate": False, "lr": 1.0} and isinstance(got["lr"], float)


@pytest.mark.parametrize("item, names", [("image_size", "FIELD=VALUE"), ("imagesize=112", "imagesize"),
                                         ("image_size=big", "must be int.*image_size=128"), ("cell_verify=1", "bool")])
def test_a_bad_set_names_the_field_and_the_fix(item, names):
    with pytest.raises(SystemExit, match=names):
        parse_overrides([item], AutoraterConfig)
