"""The outcome heads' options of issue 56 (``TrainConfig.outcome``): several wordings, rewound successes, a per-frame
"outcome reached" target, and two views of one rollout that must agree. Each trains a step; each does what it says on
hand-made rows; with every option off a head trains exactly as before. Paraphrases are never negatives."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from autorater.data.suite import SWAP_TAG, Scenario, Suite
from autorater.models import PRESETS
from autorater.models.parts.outcome import OutcomeHead
from autorater.training.inputs.dataset import task_key
from autorater.training.stages.outcome import (
    REWIND_MARGIN_S,
    OutcomeHeadPart,
    OutcomeInputs,
    OutcomeRecipe,
    reached_targets,
    rewound_frames,
)


def test_the_outcome_is_reached_at_the_marker_and_not_before():
    frame_s = torch.tensor([[0.0, 1.0, 2.0, 3.0]] * 3)
    y = reached_targets(np.array([0.9, 0.1, 0.8]), np.array([1.5, np.nan, np.nan]), frame_s)
    assert y[0].tolist() == pytest.approx([0.0, 0.0, 0.9, 0.9])  # a success: from the marker on
    assert y[1].tolist() == [0.0] * 4  # a failure with no marker: never reached
    assert torch.isnan(y[2]).all()  # a success with no marker: not trained


def test_a_rewound_clip_plays_the_frames_before_the_success_forward_then_back():
    frame_s = torch.tensor([0.0, 1.0, 2.0, 3.5])
    order = rewound_frames(frame_s, torch.tensor(3.2), 4)  # frames up to 2.2 s precede the success surely
    assert order[0] == 0 and max(order) == 2 and order[-1] < 2  # forward to the furthest, then back
    assert all(float(frame_s[j]) <= 3.2 - REWIND_MARGIN_S for j in order)  # never a frame that may show it
    assert rewound_frames(frame_s, torch.tensor(1.5), 4) is None  # one frame before it: nothing to rewind
    assert rewound_frames(frame_s, torch.tensor(float("nan")), 4) is None


def inputs(n: int = 8, k: int = 4, seed: int = 0) -> OutcomeInputs:
    """Hand-made rows: successes (even rows, marker at 3.2 s) and failures; rows 0 and 1 are two views of one rollout;
    rows 0-3 have two paraphrases each (rows of ``alt_text``)."""
    g = torch.Generator().manual_seed(seed)
    head = OutcomeHead(channels=8, dim=16, queries=2, layers=1, heads=2, pooling="max")
    p = np.array([0.9 if i % 2 == 0 else 0.1 for i in range(n)])
    marker = np.array([3.2 if i % 2 == 0 else np.nan for i in range(n)])
    frame_s = torch.tensor([[0.0, 1.0, 2.0, 3.5]] * n)
    twin = torch.full((n,), -1, dtype=torch.long)
    twin[0], twin[1] = 1, 0
    x = OutcomeInputs(maps=torch.randn(n, k, 8, 3, 3, generator=g).half(), share=frame_s / 3.5, since_s=frame_s,
                      text=torch.randn(n, head.text_dim, generator=g), target=torch.tensor(p, dtype=torch.float32),
                      weight=torch.ones(n), reached=reached_targets(p, marker, frame_s),
                      alt_text=torch.randn(8, head.text_dim, generator=g),
                      alt_rows=[[2 * i, 2 * i + 1] if i < 4 else [] for i in range(n)], twin=twin, frame_s=frame_s,
                      marker_s=torch.tensor(marker, dtype=torch.float32))
    return head, x


@pytest.mark.parametrize("option", ["paraphrases", "rewind", "reached", "consistency"])
def test_each_option_trains_a_step(option):
    head, x = inputs()
    part = OutcomeHeadPart(head, x, np.arange(6, 8), dataclasses.replace(OutcomeRecipe(), **{option: 1.0}))
    part.train_rows = set(range(6))
    loss, named = part.loss(np.arange(6), np.random.default_rng(0))
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in head.out.parameters())
    if option in ("reached", "consistency"):
        assert float(named[option]) > 0


def test_with_every_option_off_a_head_sees_exactly_the_rows_it_did_before():
    head, x = inputs()
    head.eval()  # no dropout: the two losses compare exactly
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    plain = OutcomeHeadPart(head, x, np.arange(6, 8)).loss(np.arange(6), rng_a)[0].detach()
    rows = torch.arange(6)
    from autorater.models.parts.outcome import outcome_loss

    old = outcome_loss(head(x.maps[rows].float(), x.share[rows], x.since_s[rows], x.text[rows]), x.target[rows],
                       x.weight[rows]).detach()
    assert float(plain) == pytest.approx(float(old)) and rng_a.random() == rng_b.random()  # no extra draws


def test_rewound_successes_are_added_as_failures_and_paraphrases_change_only_rows_that_have_them():
    head, x = inputs()
    part = OutcomeHeadPart(head, x, np.arange(0), OutcomeRecipe(rewind=1.0, paraphrases=1.0))
    rng = np.random.default_rng(0)
    rows = np.arange(8)
    words = part._words(rows, rng)
    assert not torch.equal(words[:4], x.text[:4]) and torch.equal(words[4:], x.text[4:])
    assert all(any(torch.equal(words[i], x.alt_text[j]) for j in x.alt_rows[i]) for i in range(4))
    maps, *_, target, weight = part._rewound(rows, rng, x.maps[rows].float(), x.share[rows], x.since_s[rows],
                                             x.text[rows], x.target[rows], x.weight[rows])
    added = len(target) - len(rows)
    assert added == 4 and target[len(rows):].tolist() == [0.0] * 4  # every success, rewound: a failure
    assert torch.equal(maps[len(rows)][-1], x.maps[0, 1].float())  # its last frame: one before the furthest


def test_two_views_that_agree_cost_nothing():
    head, x = inputs()
    x.maps[1] = x.maps[0]
    x.text[1] = x.text[0]
    part = OutcomeHeadPart(head.eval(), x, np.arange(0), OutcomeRecipe(consistency=1.0))
    part.train_rows = {0, 1}
    _, named = part.loss(np.array([0, 1]), np.random.default_rng(0))
    assert float(named["consistency"]) == pytest.approx(0.0, abs=1e-10)


def test_a_paraphrase_is_never_a_negative_and_a_swap_asks_the_task_it_swapped_in():
    own = Scenario("s0", "open the drawer", "open", metadata={"task": "drawer-open-v3",
                                                              "paraphrases": ["pull the drawer open"]})
    other = Scenario("s1", "pull the drawer open", "open", metadata={"task": "drawer-open-v3"})
    swap = Scenario("s2", "open the drawer", "open", tags=[SWAP_TAG],
                    metadata={"task": "drawer-close-v3", "instruction_spec": {"task": "drawer-open-v3"}})
    assert task_key(own) == task_key(other) == task_key(swap) == "task:drawer-open-v3"
    from autorater.training.inputs.batches import TrainingData, _mismatch_partners
    from autorater.training.inputs.dataset import Examples

    ex = Examples(task_keys=[task_key(s) for s in (own, other, swap)] + ["task:window-open-v3"],
                  categories=["open"] * 4, p_success=[1.0] * 4)
    data = TrainingData(ex, None, None, None)
    for seed in range(20):
        chosen, partners = _mismatch_partners(np.arange(4), data, 1.0, np.random.default_rng(seed), True)
        assert all((i == 3) != (j == 3) for i, j in zip(chosen, partners))  # only the window is another task


def test_examples_carry_each_rows_paraphrases_and_other_view(tmp_path):
    from autorater.training.inputs.dataset import build_examples
    from model_suites import camera_suite

    suite = camera_suite(tmp_path / "s", n_scenarios=2, per_scenario=2)
    scenarios = [dataclasses.replace(s, metadata={"paraphrases": [s.instruction, "another wording"]})
                 for s in suite.scenarios]
    continuations = [dataclasses.replace(c, metadata={"twin": ids[1 - k]})
                     for ids in [[c.continuation_id for c in suite.continuations if c.scenario_id == s.scenario_id]
                                 for s in suite.scenarios]
                     for k, c in enumerate(c for c in suite.continuations if c.continuation_id in ids)]
    with_views = Suite(suite.root, suite.info, scenarios, continuations, suite.annotations)
    ex = build_examples([with_views])
    assert all(p == ["another wording"] for p in ex.paraphrases)  # the instruction itself is not its paraphrase
    row = {cid: i for i, cid in enumerate(ex.continuation_ids)}
    for i, twin in enumerate(ex.twins):
        j = row[twin.split("/", 1)[1]]
        assert ex.twins[j] == f"0/{ex.continuation_ids[i]}"


def test_the_heads_apart_train_with_every_option_on_a_tiny_suite(tmp_path):
    from autorater.training.recipe import recipe_for
    from autorater.training.train import train
    from model_suites import camera_suite, one_thread

    suite = camera_suite(tmp_path / "suite", n_scenarios=6, per_scenario=2)
    config = PRESETS["tiny-general"].replace(outcome_members=1)
    tc = recipe_for(config, epochs=1, val_share=0.34, cache_dir=str(tmp_path / "cache"),
                    stream={"match_warmup_epochs": 1},
                    outcome={"steps": 8, "paraphrases": 0.5, "rewind": 0.5, "reached": 0.5, "consistency": 0.5})
    before = one_thread()
    try:
        result = train([suite], config, tc, out=tmp_path / "m")
    finally:
        torch.set_num_threads(before)
    assert result.recipe.outcome.rewind == 0.5 and (tmp_path / "m" / "model.safetensors").is_file()
    assert any("train_reached" in h for h in result.history if h.get("part") == "outcome0")
