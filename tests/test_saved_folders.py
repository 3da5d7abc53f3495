"""Model folders saved before the parts became modules (commit eed8924: ``events.*`` / ``events.<k>.*`` stream heads,
``outcome.*`` / ``outcome.<k>.*`` outcome heads with the gate in the first, ``outcome_encoder.*``) load and rate as
they did, to 1e-4.

The fixtures in ``tests/data/saved_before_parts/`` were written by that commit's ``save_pretrained`` (sparse weights,
so that each folder compresses to a few kilobytes), beside the outputs the model gave then on fixed inputs
(``expected.json``): one and several stream heads, one and several outcome heads, a learning top block (the
default recipe's ``outcome.blocks`` 1), the grid recipe with and without an ensemble.
"""

import json
import tarfile
from pathlib import Path

import pytest
import torch

from autorater.models import AutoModel

FIXTURES = Path(__file__).resolve().parent / "data" / "saved_before_parts"


def fixed_inputs(size: int, seed: int = 7) -> dict:
    """The inputs the fixtures were rated on (a short clip padded by repeating its last frame among them)."""
    g = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, 256, (3, 8, size, size, 3), dtype=torch.uint8, generator=g)
    times = (torch.arange(8).float() / 8).repeat(3, 1)
    times[2, 6:] = times[2, 5]
    return {"frames": frames, "times_s": times, "takeover_s": torch.tensor([0.0, 0.25, 0.1]),
            "instructions": ["open the drawer", "press the button", "pick up the red ball"]}


@pytest.mark.parametrize("name", ["events-1", "events-2", "general-1", "general-2"])
def test_a_folder_saved_before_the_parts_were_modules_rates_as_it_did(name, tmp_path):
    with tarfile.open(FIXTURES / f"{name}.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / name
    model = AutoModel.from_pretrained(folder)
    expected = json.loads((folder / "expected.json").read_text())
    with torch.no_grad():
        out = model(**fixed_inputs(model.config.decoded_size()))
    for key, want in expected.items():
        got = getattr(out, key)
        assert torch.allclose(got, torch.tensor(want), atol=1e-4, rtol=1e-5), (key, got, want)
