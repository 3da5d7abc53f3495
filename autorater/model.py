"""The Autorater base: frames + instruction -> P(success), the marker time, the failure mode; model folders.

``AutoModel.from_config(config)`` builds the architecture its config names (the registry, ``autorater/models/``):
``general`` (the default) or ``events`` (the BabyAI grid recipe). Every architecture
takes the same inputs and returns the same :class:`AutoraterOutput`; this module holds what they share:
the output and target types, marker decoding, and the model folder (``config.json`` + ``model.safetensors``,
no pickle), checked before anything large is allocated.

Example:
    >>> from autorater.models import PRESETS, AutoModel
    >>> model = AutoModel.from_config(PRESETS["tiny"].replace(vocab=["go", "to", "the", "red", "ball"]))
    >>> type(model).__name__
    'EventsModel'
    >>> frames = torch.zeros(2, 8, 32, 32, 3, dtype=torch.uint8)
    >>> times = torch.arange(8).float().repeat(2, 1) / 8
    >>> out = model(frames=frames, times_s=times, takeover_s=torch.zeros(2),
    ...             instructions=["go to the red ball"] * 2)
    >>> out.success_logit.shape, out.marker_logits.shape
    (torch.Size([2]), torch.Size([2, 9]))
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn

from autorater.architecture import Processor
from autorater.config import AutoraterConfig, read_config_json
from autorater.device import module_device
from autorater.encoders import FrameEncoder, create_frame_encoder


@dataclass
class AutoraterOutput:
    success_logit: torch.Tensor  # (batch,)
    marker_logits: torch.Tensor  # (batch, frames + 1): per sampled frame, then "end of video"
    failure_logits: torch.Tensor  # (batch, failure modes)
    match_logit: torch.Tensor  # (batch,)
    loss: torch.Tensor | None = None
    losses: dict = field(default_factory=dict)
    # Event models: log P(the first event is a success at frame t) (batch, frames), and log P(the first event is a
    # failure at t, or none: "end") (batch, frames + 1): the marker of a called success is a success frame
    success_marker_logits: torch.Tensor | None = None
    failure_marker_logits: torch.Tensor | None = None

    def cpu(self) -> "AutoraterOutput":
        """The outputs on the CPU (detached), for decoding and numpy."""
        def move(t):
            return None if t is None else t.detach().cpu()

        return AutoraterOutput(move(self.success_logit), move(self.marker_logits), move(self.failure_logits),
                               move(self.match_logit), success_marker_logits=move(self.success_marker_logits),
                               failure_marker_logits=move(self.failure_marker_logits))


def read_frames(times_s: torch.Tensor, takeover_s: torch.Tensor) -> torch.Tensor:
    """(b, t) bool: the frames a model reads: from the last one at or before the takeover (the reference state)
    on, repeats of the previous frame (padding) left out."""
    new = torch.ones_like(times_s, dtype=torch.bool)
    new[:, 1:] = times_s[:, 1:] > times_s[:, :-1]
    after = times_s >= takeover_s[:, None]
    before = torch.zeros_like(after)
    before[:, :-1] = after[:, 1:] & ~after[:, :-1]  # the frame just before the first one after the takeover
    return new & (after | before)


@dataclass
class Targets:
    """Training targets; every field (batch,). Use NaN / -1 where unknown."""

    success: torch.Tensor  # soft label in [0, 1]; NaN = unknown (no success loss)
    marker_index: torch.Tensor  # long: the sampled frame nearest the marker, ``frames`` for "end"; -1 unknown
    failure_mode: torch.Tensor  # long: index into config.failure_modes; -1 unknown / not a failure
    match: torch.Tensor  # 1 = the video's own instruction, 0 = another's (no marker or failure-mode loss);
    #                      NaN = its own, but no match loss (``match_on_successes``: a failed video)
    # event, match, counterfactual: the event likelihood (it holds the outcome, the marker and the failure mode), the
    # instruction match, P(success) under another instruction
    weights: tuple[float, float, float] = (1.0, 0.5, 0.3)
    balanced: bool = False  # events: the outcome's two classes weigh the same in each batch's event loss
    row_weight: torch.Tensor | None = None  # (batch,) each row's weight in the outcome path's loss (None: 1)
    outcome_weights: tuple[float, float] = (1.0, 0.0)  # the outcome path's loss; its rows pairing a video with
    #                                                   another task's words (``match`` 0) weigh this much


class ModelPart(nn.Module):
    """A part of a model that trains as one stage (``Autorater.parts`` finds them by this type): the event stream, the
    outcome path (``autorater/models/parts/``). Its class names the stage that trains it (``stage``: training's plan
    looks the stage up by this name, never by the class) and the keys of the cached inputs it alone reads (``inputs``,
    beside ``"x"``: the rest of a model trains without them)."""

    stage: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...]] = ()


# -- the model folder's files (besides calibration.json and metadata.json: autorater.rater) -----------------------
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


class Autorater(nn.Module):
    """A video-language autorater, the base of every architecture. ``save_pretrained`` / ``from_pretrained``
    round-trip a model folder.

    A subclass (``autorater/models/``) names its ``config_class``, builds its parts in ``__init__`` and rates
    encoded clips in :meth:`forward_head`. ``autorater.models.AutoModel`` builds or loads the class a config names.
    """

    config_class: type[AutoraterConfig] | None = None  # the architecture's config (set by each subclass)
    processor_class: type = Processor  # what it reads of a video before any weight (autorater/architecture.py)
    # How the weights of folders saved under older names map to today's, applied in turn on loading: each function
    # takes a name and gives today's (the same when it is current; None: no longer a weight). The parts' own
    # (``autorater/models/parts/``: ``stream.legacy_name``, ``outcome.legacy_name``).
    weight_names: tuple = ()

    def __init__(self, config: AutoraterConfig):
        if self.config_class is None or type(config) is not self.config_class:
            raise TypeError(f"{type(self).__name__} takes a {getattr(self.config_class, '__name__', 'concrete')} "
                            f"config, got {type(config).__name__} (fix: autorater.models.AutoModel.from_config)")
        super().__init__()
        self.config = config
        self.processor = self.processor_class(config)
        self.frame_encoder = create_frame_encoder(config)

    def grid_size(self) -> tuple[int, int]:
        """(h, w) of the frame encoder's output for a frame of ``image_size``."""
        with torch.no_grad():
            probe = torch.zeros(1, 1, self.config.image_size, self.config.image_size, 3, dtype=torch.uint8)
            return tuple(self.frame_encoder(probe).shape[-2:])

    def forward(self, times_s: torch.Tensor, takeover_s: torch.Tensor, instructions: list[str],
                frames: torch.Tensor | None = None, features: torch.Tensor | None = None,
                targets: Targets | None = None, clip_index: torch.Tensor | None = None,
                encoded: dict | None = None) -> AutoraterOutput:
        """Rate a batch of clips.

        Args:
            times_s: (b, t) time of each sampled frame, seconds from the first frame.
            takeover_s: (b,) when the agent takes over, seconds.
            instructions: b instructions.
            frames: (b, t, H, W, 3) uint8; or pass what :meth:`encode` returns (the feature cache's entries): its
                ``"x"`` as ``features`` (every frame's), the rest as ``encoded`` (an architecture's other encoded
                inputs, per clip, carried as they are).
            targets: when given, the output carries the loss.
            clip_index: (b,) long: row i rates clip ``clip_index[i]`` of ``frames`` / ``features`` / ``encoded`` (a
                batch whose rows pair one video with several instructions encodes each video once).
        """
        device = self.device
        times_s, takeover_s = times_s.to(device), takeover_s.to(device)
        if features is None:
            encoded = self.encode(frames.to(device), times_s, takeover_s)
            features = encoded.pop("x")
        if clip_index is None:
            features = self.frame_encoder.finish(features.to(device), read_frames(times_s, takeover_s))
        else:
            clip_index = clip_index.to(device)
            row_of = torch.zeros(len(features), dtype=torch.long, device=device).scatter_(
                0, clip_index, torch.arange(len(clip_index), device=device))  # a row of each clip: same times
            keep = read_frames(times_s[row_of], takeover_s[row_of])
            features = self.frame_encoder.finish(features.to(device), keep)[clip_index]
        if encoded:  # their trainable parts, once per clip
            encoded = self.finish_encoded({k: v.to(device) for k, v in encoded.items()})
            if clip_index is not None:
                encoded = {k: v[clip_index] for k, v in encoded.items()}
        if targets is not None:
            targets = dataclasses.replace(targets, **{f.name: getattr(targets, f.name).to(device)
                                                      for f in dataclasses.fields(targets)
                                                      if isinstance(getattr(targets, f.name), torch.Tensor)})
        return self.forward_head(features, times_s, takeover_s, instructions, targets, encoded=encoded or None)

    def encode(self, frames: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor) -> dict:
        """What the feature cache stores of decoded clips (b, t, H, W, 3): a mapping of the encoders' fixed parts'
        outputs, ``"x"`` the stream of every frame's (an architecture may add its own keys, per clip)."""
        return {"x": self.frame_encoder.cacheable(self.processor.prepare(frames, times_s, takeover_s)["x"])}

    def cached_shapes(self) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
        """What the feature cache stores of a clip, by ``encode``'s keys: ``"x"`` of one frame (its dtype and shape;
        a clip holds up to ``clip_frames`` of them), an architecture's other keys of the whole clip."""
        return {"x": self.frame_encoder.cached_frame(self.config.image_size)}

    def finish_encoded(self, encoded: dict) -> dict:
        """An architecture's other encoded inputs (``encode``'s keys beside ``"x"``) through their trainable parts.
        As they are by default."""
        return encoded

    @property
    def device(self) -> torch.device:
        """Where the model's weights are (``model.to(resolve_device("auto"))`` puts it on a GPU when present)."""
        return module_device(self)

    def forward_head(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                     instructions: list[str], targets: Targets | None = None,
                     encoded: dict | None = None) -> AutoraterOutput:
        raise NotImplementedError

    def init_from_data(self, features: torch.Tensor, times_s: torch.Tensor, takeover_s: torch.Tensor,
                       marker_index: torch.Tensor, success: torch.Tensor, seed: int) -> None:
        """Before training from scratch: an architecture may start parts of itself where its training clips say
        (features (n, t, ...) as cached, times_s (n, t), takeover_s (n,), the annotators' marker_index (n,),
        success (n,) bool). Nothing by default."""

    # -- decoding -----------------------------------------------------------------------------
    def decode_marker(self, marker_logits: torch.Tensor, times_s: torch.Tensor, duration_s: torch.Tensor):
        """Marker time (s) and its uncertainty (s, the spread of the distribution) per clip.

        Args:
            marker_logits: (b, t + 1).
            times_s: (b, t) sampled frame times.
            duration_s: (b,) video durations ("end" bin time).
        """
        bins = torch.cat([times_s, duration_s[:, None]], dim=1)  # (b, t + 1)
        probs = marker_logits.softmax(-1)
        idx = probs.argmax(-1)
        marker = bins.gather(1, idx[:, None]).squeeze(1)
        mean = (probs * bins).sum(-1)
        spread = ((probs * (bins - mean[:, None]) ** 2).sum(-1)).sqrt()
        return marker, spread

    # -- folders ------------------------------------------------------------------------------
    @classmethod
    def current_names(cls, names) -> dict[str, str | None]:
        """Each saved weight's name -> its name today (``weight_names`` applied in turn; None: dropped)."""
        out = {}
        for name in names:
            new = name
            for rename in cls.weight_names:
                new = rename(new)
                if new is None:
                    break
            out[name] = new
        return out

    def parts(self) -> dict[str, ModelPart]:
        """Every part of the model that trains as a stage (:class:`ModelPart`: the event stream, an outcome path), by
        its name in the module tree, in the model's order."""
        return {name: m for name, m in self.named_modules() if isinstance(m, ModelPart)}

    def join(self) -> nn.Parameter | None:
        """The weight that joins parts trained apart into one P(success) (the general model's ``gate``); None for a
        model with none."""
        return None

    def without(self, *parts: str) -> "Autorater":
        """A fresh model of this architecture less ``parts`` (its config's ``without``), its weights drawn from
        torch's default generator: what trains the rest of a model whose other parts trained alone."""
        config = self.config
        for name in parts:
            config = config.without(name)
        return type(self)(config)

    def frame_encoders(self) -> dict[str, FrameEncoder]:
        """Every frame encoder of the model (the stream's, an outcome path's), by its name in the module tree."""
        return {name: m for name, m in self.named_modules() if isinstance(m, FrameEncoder)}

    def fixed_prefixes(self) -> list[str]:
        """Names (prefixes) of the weights rebuilt from their packages and never saved: each frame encoder's frozen
        pretrained part."""
        return [f"{name}.{p}" for name, encoder in self.frame_encoders().items() for p in encoder.fixed_prefixes()]

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """Everything but the frozen pretrained encoders or parts of them (they are rebuilt from their packages)."""
        skip = self.fixed_prefixes()
        return {k: v.detach().contiguous() for k, v in self.state_dict().items()
                if not any(k.startswith(s) for s in skip)}

    def save_pretrained(self, path: str | Path, metadata: dict | None = None) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ ``metadata.json``). No pickle.

        Every file is written to a temp file, fsynced and renamed; the weights carry a SHA-256 of their tensors
        and one of config.json (``weights_sha256``, ``config_sha256``) in the safetensors header, checked by
        ``from_pretrained``. Non-finite weights are refused here, not discovered by the first request.
        """
        from safetensors.torch import save_file

        from autorater.data.files import commit, json_text, temp_path, write_text_atomic

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {k: v.cpu() for k, v in self.trainable_state_dict().items()}
        bad = non_finite_tensors(state)
        if bad:
            raise ValueError(f"refusing to save a model with non-finite weights in {bad[:3]} (fix: the training "
                             f"diverged; lower the learning rate or resume from an earlier checkpoint)")
        write_text_atomic(path / CONFIG_FILE, json_text(self.config.to_dict()))
        tmp = temp_path(path / WEIGHTS_FILE)
        save_file(state, str(tmp), metadata={"format": "autorater", "encoder": self.config.to_dict().get("encoder", ""),
                                             "weights_sha256": weights_sha256(state),
                                             "config_sha256": config_sha256(self.config.to_dict())})
        commit(tmp, path / WEIGHTS_FILE)
        if metadata is not None:
            write_text_atomic(path / "metadata.json", json.dumps(metadata, indent=1, default=str) + "\n")
        return path

    @staticmethod
    def check_folder(path: str | Path) -> Path:
        """``path`` if it holds a saved model (config.json and model.safetensors); FileNotFoundError otherwise."""
        path = Path(path)
        if not (path / CONFIG_FILE).is_file() or not (path / WEIGHTS_FILE).is_file():
            raise FileNotFoundError(f"{path} is not a model folder: it needs config.json and model.safetensors "
                                    f"(written by `autorater train` or Autorater.save_pretrained)")
        return path

    @classmethod
    def from_pretrained(cls, path: str | Path, allow_unverified: bool = False,
                        config: AutoraterConfig | None = None) -> "Autorater":
        """Load a model folder of this architecture (``AutoModel.from_pretrained``: of the one its config.json
        names; ``config``: that config, already read). Reads JSON and safetensors only: loading can never run code.

        Checked before anything large is allocated: the config (every value in its range), and the tensor shapes of
        the safetensors header against a model built on the meta device (no memory). Then the weights' checksum
        and that every weight is finite (``calibration.json`` is the Rater's to read: ``Rater.load``). Weights
        without a checksum (a folder saved before it existed, or one whose checksum was removed) are refused unless
        ``allow_unverified``. Every failure is a ValueError that names the file and the fix.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = cls.check_folder(path)
        weights = path / WEIGHTS_FILE
        restore = "(fix: the file is damaged; restore it from the MLflow artifact or retrain)"
        if cls.config_class is None:
            raise TypeError("Autorater is the base of the architectures: load a folder with "
                            "autorater.models.AutoModel.from_pretrained (it reads the folder's architecture)")
        if config is None:
            try:
                config = cls.config_class.load(path / CONFIG_FILE)
            except ValueError as err:  # an unknown field, a wrong type or another architecture: name the file
                msg = str(err)
                raise ValueError(msg if str(path / CONFIG_FILE) in msg else f"{path / CONFIG_FILE}: {msg} (fix: "
                                 f"restore the config.json saved with this model)") from None
        try:
            header, meta = read_safetensors_header(weights)
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"cannot read {weights}: {err} {restore}") from None
        names = cls.current_names(header)  # a folder saved under older weight names: today's
        planned = _planned_shapes(cls, config, path)
        if planned is not None:
            _compare_shapes(planned, {names[k]: v for k, v in header.items() if names[k] is not None}, weights)
        model = cls(config)
        try:
            state = load_file(str(weights))
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"cannot read {weights}: {err} {restore}") from None
        expected = model.trainable_state_dict()
        _compare_shapes({k: tuple(v.shape) for k, v in expected.items()},
                        {names[k]: tuple(v.shape) for k, v in state.items() if names[k] is not None}, weights)
        stored = meta.get("weights_sha256")
        if stored is None and not allow_unverified:
            raise ValueError(f"{weights} carries no checksum of its weights, so a change to them cannot be detected "
                             f"(fix: if you trust this folder, pass --allow-unverified (allow_unverified=True), then "
                             f"save it again with save_pretrained, which writes the checksum; or retrain)")
        if stored is not None and stored != weights_sha256(state):
            raise ValueError(f"{weights}: the weights do not match the checksum saved with them (bytes changed "
                             f"since `save_pretrained`) {restore}")
        _check_config_sha256(path, meta, allow_unverified)
        bad = non_finite_tensors(state)
        if bad:
            raise ValueError(f"{weights}: non-finite weights (NaN or infinity) in {bad[:3]}; every prediction would "
                             f"fail {restore}")
        model.load_state_dict({names[k]: v for k, v in state.items() if names[k] is not None}, strict=False)
        return model.eval()


def weights_sha256(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors (by name: name, dtype, shape, bytes): what ``save_pretrained`` stores."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def config_sha256(config: dict) -> str:
    """SHA-256 of a config.json's object (its content: key order and spacing aside): what ``save_pretrained``
    stores beside the weights' checksum."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _check_config_sha256(folder: Path, meta: dict, allow_unverified: bool) -> None:
    """config.json against the checksum saved with the weights: a changed one is refused (``allow_unverified``: a
    warning); a folder saved before the checksum existed loads, with a warning that says how to add it."""
    path, stored = folder / CONFIG_FILE, meta.get("config_sha256")
    if stored is None:
        if meta.get("weights_sha256") is not None:
            warnings.warn(f"{path} carries no checksum (saved before it existed), so a change to it cannot be "
                          f"detected (fix: save the folder again with save_pretrained)", UserWarning, stacklevel=3)
        return
    if stored == config_sha256(read_config_json(path)):
        return
    message = (f"{path} does not match the checksum saved with the weights (changed since `save_pretrained`: its "
               f"values set how much every rating decodes) (fix: restore the config.json saved with this model; if "
               f"you changed it on purpose, load it with --allow-unverified and save it again)")
    if not allow_unverified:
        raise ValueError(message)
    warnings.warn(message, UserWarning, stacklevel=3)


def non_finite_tensors(state: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors holding a NaN or an infinity."""
    return sorted(k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))


def read_safetensors_header(path: str | Path) -> tuple[dict[str, tuple], dict[str, str]]:
    """({tensor name: shape}, metadata) of a safetensors file, from its header alone (no tensor is read)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        return shapes, dict(f.metadata() or {})


def _planned_shapes(cls: type, config: AutoraterConfig, path: Path) -> dict[str, tuple] | None:
    """The trainable tensors' shapes of a model built from ``config`` on the meta device (no memory); None where a
    part cannot be built there (pretrained encoders load their weights; then the shapes are compared after the
    model is built)."""
    import warnings

    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            planned = cls(config)
    except ValueError as err:
        raise ValueError(f"{path / CONFIG_FILE}: {err} "
                         "(fix: restore the config.json saved with this model)") from None
    except Exception:  # noqa: BLE001 - e.g. transformers' from_pretrained refuses the meta device
        return None
    return {k: tuple(v.shape) for k, v in planned.trainable_state_dict().items()}


def _compare_shapes(expected: dict[str, tuple], stored: dict[str, tuple], weights: Path) -> None:
    missing, extra = set(expected) - set(stored), set(stored) - set(expected)
    bad = [k for k in set(expected) & set(stored) if tuple(stored[k]) != tuple(expected[k])]
    if missing or extra or bad:
        raise ValueError(f"{weights} does not match config.json: missing "
                         f"{sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}, wrong shape {sorted(bad)[:3]} "
                         f"(fix: keep the config.json saved with these weights, and load with the autorater version "
                         f"that trained them; a folder from an older architecture must be retrained)")


__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "Autorater", "AutoraterOutput", "ModelPart", "Targets", "config_sha256",
           "non_finite_tensors", "read_frames", "read_safetensors_header", "weights_sha256"]
