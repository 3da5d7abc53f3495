"""The events model's parts: the competing-risks chain, its losses, the words, the cells and the place prior."""

import numpy as np
import pytest
import torch

from autorater.encoders import PixelCells
from autorater.models import PRESETS, AutoConfig, AutoModel
from autorater.models.events.head import HalvesBagOfWords
from autorater.models.parts.risks import WINDOW_S, active_frames, event_losses, first_events
from autorater.models.parts.text import SentenceText
from model_suites import saved_before_the_config_checksum


def _random_chain(seed=0, b=4, t=10, classes=3):
    g = torch.Generator().manual_seed(seed)
    logp = torch.randn(b, t, classes, generator=g).log_softmax(-1)
    active = torch.rand(b, t, generator=g) > 0.3
    return logp, active


@pytest.mark.parametrize("seed", range(5))
def test_first_events_and_no_event_are_a_probability_distribution(seed):
    logp, active = _random_chain(seed)
    first, none = first_events(logp, active)
    total = first.exp().sum((1, 2)) + none.exp()
    assert torch.allclose(total, torch.ones_like(total), atol=1e-5)


def test_inactive_frames_hold_no_event_whatever_their_scores():
    logp, active = _random_chain(1)
    first, none = first_events(logp, active)
    other = torch.where(active[..., None], logp, torch.randn_like(logp).log_softmax(-1))
    first2, none2 = first_events(other, active)
    assert torch.allclose(first.exp(), first2.exp()) and torch.allclose(none, none2)
    assert (first.exp()[~active] == 0).all()


def test_the_first_event_wins_over_later_ones():
    # a sure failure at frame 2 and a sure success at frame 5: the clip is a failure
    logp = torch.full((1, 8, 3), -30.0)
    logp[0, :, 0] = 0.0
    logp[0, 2] = torch.tensor([-30.0, -30.0, 0.0])
    logp[0, 5] = torch.tensor([-30.0, 0.0, -30.0])
    first, none = first_events(logp, torch.ones(1, 8, dtype=torch.bool))
    assert first[0, :, 1].exp().sum() > 0.99 and first[0, :, 0].exp().sum() < 1e-6


def test_repeated_frames_and_frames_before_the_takeover_are_inactive():
    times = torch.tensor([[0.0, 0.125, 0.25, 0.25, 0.375], [0.0, 0.125, 0.25, 0.375, 0.5]])
    active = active_frames(times, torch.tensor([0.0, 0.2]))
    assert active.tolist() == [[True, True, True, False, True], [False, False, True, True, True]]


def _loss_inputs(success, marker_index, failure_class=-1, own=True, timeout=False, t=12, seed=0):
    logp, _ = _random_chain(seed, b=1, t=t)
    logp = logp.requires_grad_()
    times = torch.arange(t).float()[None] / 8
    active = torch.ones(1, t, dtype=torch.bool)
    first, none = first_events(logp, active)
    match = torch.zeros(1, t, requires_grad=True)
    args = dict(times_s=times, success=torch.tensor([success]), marker_index=torch.tensor([marker_index]),
                failure_class=torch.tensor([failure_class]), own=torch.tensor([own]), timeout=torch.tensor([timeout]))
    return logp, first, none, match, active, args


def test_a_success_is_scored_on_its_marker_window_only():
    logp, first, none, match, active, args = _loss_inputs(1.0, marker_index=10)
    loss = event_losses(first, none, match, active, **args)["event"]
    times = args["times_s"][0]
    window = (times >= times[10] - WINDOW_S[0]) & (times <= times[10] + WINDOW_S[1])
    assert torch.allclose(loss, -torch.logsumexp(first[0, window, 0], 0))
    loss.backward()
    after = ~window & (torch.arange(len(times)) > 10)
    assert (logp.grad[0, after] == 0).all()  # what happens after the window does not matter


def test_a_timeout_is_the_probability_of_no_event_and_an_unknown_marker_the_outcome():
    _, first, none, match, active, args = _loss_inputs(0.0, marker_index=12, timeout=True)
    assert torch.allclose(event_losses(first, none, match, active, **args)["event"], -none[0])
    _, first, none, match, active, args = _loss_inputs(1.0, marker_index=-1)
    assert torch.allclose(event_losses(first, none, match, active, **args)["event"],
                          -torch.logsumexp(first[0, :, 0], 0))


def test_an_early_failure_of_a_known_mode_is_scored_on_that_mode():
    _, first, none, match, active, args = _loss_inputs(0.0, marker_index=6, failure_class=1)
    loss = event_losses(first, none, match, active, **args)["event"]
    times = args["times_s"][0]
    window = (times >= times[6] - WINDOW_S[0]) & (times <= times[6] + WINDOW_S[1])
    assert torch.allclose(loss, -torch.logsumexp(first[0, window, 1], 0))


def test_another_instructions_row_trains_only_the_counterfactual_and_the_match():
    _, first, none, match, active, args = _loss_inputs(0.05, marker_index=6, own=False)
    losses = event_losses(first, none, match, active, **args)
    assert losses["event"] == 0 and losses["counterfactual"] > 0


def test_the_words_keep_which_half_of_the_sentence_they_are_in():
    words = HalvesBagOfWords(["put", "the", "red", "ball", "next", "to", "blue", "key"])
    a, b = words(["put the red ball next to the blue key", "put the blue ball next to the red key"])
    assert a[:words.size].equal(b[:words.size]) and not a.equal(b)  # the same bag, bound differently
    unknown = words(["open the purple door"])[0]
    assert unknown[0] == 1  # unknown words share slot 0


def test_pixel_cells_read_each_cells_colour():
    frames = torch.zeros(1, 1, 32, 32, 3, dtype=torch.uint8)
    frames[0, 0, 8:16, 16:24] = torch.tensor([255, 0, 0], dtype=torch.uint8)  # cell (1, 2) of a 4 x 4 grid
    cells = PixelCells(grid=4, k=2)(frames)[0, 0]  # (3 k^2, 4, 4)
    assert cells.shape == (12, 4, 4)
    assert torch.allclose(cells[:, 1, 2].view(3, 4)[0], torch.ones(4))  # red channel of every sub-block
    assert cells[:, 1, 2].view(3, 4)[1:].abs().max() == 0 and cells[:, 0, 0].abs().max() == 0


def test_the_place_prior_centres_on_the_cell_that_changes_at_the_marker():
    from autorater.models.events import place_priors

    n, t, g = 6, 40, 5
    rng = np.random.default_rng(0)
    feats = torch.from_numpy(rng.random((n, t, 3, g, g), dtype=np.float32) * 0.1)
    feats[:, 20:, :, 3, 1] += 1.0  # cell (3, 1) changes at frame 20; the annotators mark at frame 23
    (logits,) = place_priors(feats, torch.arange(t).float().repeat(n, 1) / 8, torch.zeros(n), torch.full((n,), 23),
                             torch.ones(n, dtype=torch.bool), places=3, seeds=[0])
    assert logits.shape == (3, g * g)
    assert int(logits[0].argmax()) == int(logits.mean(0).argmax()) == 3 * g + 1
    wide, narrow = logits[-1].softmax(-1), logits[0].softmax(-1)
    assert wide.max() < narrow.max()  # the places start at different widths


@pytest.mark.parametrize("architecture", [None, "transformer"])
def test_a_folder_of_the_retired_first_design_is_refused_with_the_release_that_reads_it(tmp_path, architecture):
    import json

    model = AutoModel.from_config(PRESETS["tiny"])
    model.save_pretrained(tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    del cfg["architecture"]  # the first design's folders: no architecture field, or "transformer"
    (tmp_path / "m" / "config.json").write_text(json.dumps({**cfg, **({"architecture": architecture}
                                                                      if architecture else {})}))
    saved_before_the_config_checksum(tmp_path / "m")
    with pytest.raises(ValueError, match=r"config.json: architecture 'transformer' .* retired; autorater 0.1.0 .* "
                                         r"\(fix: load it with that release, or retrain"):
        AutoModel.from_pretrained(tmp_path / "m")


def test_an_unknown_architecture_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="known: general, events"):
        AutoConfig.from_dict({**PRESETS["tiny"].to_dict(), "architecture": "lstm"})


def test_an_events_folder_from_before_place_inputs_loads_as_it_was_trained(tmp_path):
    import json

    model = AutoModel.from_config(PRESETS["tiny"].replace(place_inputs=False))
    model.save_pretrained(tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    del cfg["place_inputs"]
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    saved_before_the_config_checksum(tmp_path / "m")
    assert AutoModel.from_pretrained(tmp_path / "m").config.place_inputs is False


def _batch(seed=0, b=3, t=8, size=32):
    g = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, 256, (b, t, size, size, 3), generator=g, dtype=torch.uint8)
    times = torch.arange(t).float()[None].expand(b, -1) / 8
    return dict(frames=frames, times_s=times, takeover_s=torch.zeros(b),
                instructions=["go to the red ball", "pick up a key", "open the blue door"][:b])


def test_an_ensemble_is_the_mixture_of_its_members():
    torch.manual_seed(0)
    vocab = ["go", "to", "the", "red", "ball", "pick", "up", "a", "key", "open", "blue", "door"]
    ensemble = AutoModel.from_config(PRESETS["tiny"].replace(members=3, vocab=vocab)).eval()
    assert len(ensemble.stream.heads) == 3
    single = AutoModel.from_config(PRESETS["tiny"].replace(vocab=vocab)).eval()
    batch = _batch()
    with torch.no_grad():
        out = ensemble(**batch)
        p_members, marker_members = [], []
        for head in ensemble.stream.heads:
            single.stream.heads[0].load_state_dict(head.state_dict())
            member = single(**batch)
            p_members.append(torch.sigmoid(member.success_logit))
            marker_members.append(member.marker_logits.exp())
    p = torch.sigmoid(out.success_logit)
    assert torch.allclose(p, torch.stack(p_members).mean(0), atol=1e-5)
    assert torch.allclose(out.marker_logits.exp(), torch.stack(marker_members).mean(0), atol=1e-5)
    assert torch.allclose(out.marker_logits.exp().sum(-1), torch.ones(3), atol=1e-5)  # still a distribution
    assert not torch.allclose(p_members[0], p_members[1])  # independently initialised


def test_an_ensemble_folder_round_trips_and_a_single_heads_first_names_map_to_the_stream(tmp_path):
    from autorater.models.parts.stream import legacy_name

    ensemble = AutoModel.from_config(PRESETS["tiny"].replace(members=2))
    ensemble.save_pretrained(tmp_path / "e")
    loaded = AutoModel.from_pretrained(tmp_path / "e")
    assert loaded.config.members == 2
    for key, value in ensemble.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key])
    assert any(k.startswith("stream.heads.1.") for k in ensemble.state_dict())
    # the first folders' one head (events.*) and ensemble (events.<k>.*) are the stream's heads
    assert legacy_name("events.mlp.0.weight") == "stream.heads.0.mlp.0.weight"
    assert legacy_name("events.1.mlp.0.weight") == "stream.heads.1.mlp.0.weight"
    with pytest.raises(ValueError, match="members"):
        AutoModel.from_config(PRESETS["tiny"].replace(members=0))


def test_pretrained_sentence_vectors_need_no_vocabulary_and_put_paraphrases_together():
    text = SentenceText()
    v = text(["open the drawer", "pull the drawer open", "press the button", "open the drawer"])
    assert v.shape == (4, 3 * 384) and torch.equal(v[0], v[3])
    whole = v[:, :384]
    assert (whole[0] @ whole[1]) > (whole[0] @ whole[2]) + 0.1  # a wording never seen lands near its meaning
    assert torch.allclose(whole.norm(dim=-1), torch.ones(4))


def test_an_events_model_reading_minilm_round_trips_without_storing_minilm(tmp_path):
    from safetensors import safe_open

    model = AutoModel.from_config(PRESETS["tiny"].replace(text_encoder="minilm")).eval()
    assert isinstance(model.stream.heads[0].words, SentenceText) and model.config.vocab == []
    batch = _batch()
    with torch.no_grad():
        before = torch.sigmoid(model(**batch).success_logit)
    model.save_pretrained(tmp_path / "m")
    with safe_open(tmp_path / "m" / "model.safetensors", "pt") as f:
        assert not any("words" in k or "minilm" in k.lower() for k in f.keys())
    loaded = AutoModel.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        assert torch.allclose(torch.sigmoid(loaded(**batch).success_logit), before, atol=1e-6)


def test_the_balanced_event_loss_weighs_each_class_half():
    """With ``balanced``, one success among three failures weighs as much as the three together."""
    from autorater.models.parts.risks import event_losses, first_events

    b, t = 4, 6
    torch.manual_seed(0)
    logp = torch.randn(b, t, 3).log_softmax(-1)
    active = torch.ones(b, t, dtype=torch.bool)
    first, none = first_events(logp, active)
    args = dict(first=first, none=none, match=torch.zeros(b, t), active=active,
                times_s=torch.arange(t).float().repeat(b, 1) / 8, success=torch.tensor([1.0, 0.0, 0.0, 0.0]),
                marker_index=torch.full((b,), -1), failure_class=torch.full((b,), -1),
                own=torch.ones(b, dtype=torch.bool), timeout=torch.ones(b, dtype=torch.bool))
    plain, balanced = event_losses(**args)["event"], event_losses(**args, balanced=True)["event"]
    nll = torch.stack([event_losses(**{**args, "own": torch.arange(b) == i})["event"] for i in range(b)])
    assert torch.allclose(plain, nll.mean()) and torch.allclose(balanced, 0.5 * nll[0] + 0.5 * nll[1:].mean())
