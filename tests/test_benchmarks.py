"""The quality benchmark's recipe-variant option: --set FIELD=VALUE on the default recipe."""

import pytest

from autorater.config import PRESETS
from benchmarks.quality import parse_overrides


def test_set_takes_json_values_and_bare_strings():
    got = parse_overrides(["image_size=112", "text_encoder=bow", "cell_verify=true", 'encoder="tiny_cnn"'])
    assert got == {"image_size": 112, "text_encoder": "bow", "cell_verify": True, "encoder": "tiny_cnn"}
    assert PRESETS["base"].replace(**got).image_size == 112


@pytest.mark.parametrize("item, names", [("image_size", "FIELD=VALUE"), ("imagesize=112", "imagesize"),
                                         ("image_size=big", "image_size")])
def test_a_bad_set_names_the_field_and_stops(item, names):
    with pytest.raises(SystemExit, match=names):
        parse_overrides([item])
