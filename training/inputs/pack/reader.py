"""Reading a pack (``autorater train --from-pack``): checked whole before anything trains (``checks.py``), its files
read in a stream (``files.py``), its encoder weights and sentence vectors given to the model built from it and to the
models its training run builds (``Pack.installed``), and to nothing else in the process.

Example:
    >>> pack = Pack("pack")                                                                  # doctest: +SKIP
    >>> model, data = pack.prepare(PRESETS["general"], TrainConfig())                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import torch

from autorater.config import AutoraterConfig
from autorater.data.paths import printable
from autorater.model import Autorater
from autorater.models import AutoModel, spec_of
from autorater.models.parts.text import give_vectors
from autorater.training.inputs.batches import TrainingData, seeded
from autorater.training.inputs.cache import CachedClips, cache_key, rate_clips
from autorater.training.inputs.dataset import Examples
from autorater.training.inputs.pack import checks
from autorater.training.inputs.pack.files import COMPRESSED, REPACK, PackError, fail, open_member, read_tensors
from autorater.training.inputs.pack.folder import (
    CLIPS_FILE,
    ENCODERS,
    FORMAT,
    FORMATS,
    HELD_OUT,
    PACK_FILE,
    SENTENCES_FILE,
    clips_name,
    meta_sha256,
    training_texts,
)
from autorater.training.recipe import TrainConfig

MAX_PACK_JSON = 512 << 20  # bytes of pack.json (2,000 rows: 0.4 MiB)
_FILE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}){0,2}")
_SHA = re.compile(r"[0-9a-f]{64}")


def read_meta(folder: Path, allow_unverified: bool = False) -> dict:
    """pack.json, read (bounded), its format known and its checksum (and the files' records) in order; a pack
    written before checksums (``autorater-pack-1``) only with ``allow_unverified``."""
    path = folder / PACK_FILE
    if not folder.is_dir() or not (folder / PACK_FILE).exists():
        raise FileNotFoundError(f"{printable(str(folder))} is not a pack: it has no {PACK_FILE} (fix: write one with "
                                f"`autorater pack --suite S --out {printable(str(folder))}`)")
    with open_member(folder, PACK_FILE) as f:
        text = f.read(MAX_PACK_JSON + 1)
    if len(text) > MAX_PACK_JSON:
        raise fail(path, f"over {MAX_PACK_JSON >> 20} MiB", REPACK)
    try:
        meta = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError):
        raise fail(path, "not UTF-8 JSON", REPACK) from None
    if not isinstance(meta, dict) or meta.get("format") not in FORMATS:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise fail(path, f"format {str(got)[:40]!r}, not one of {', '.join(FORMATS)}", "pack the suites again with "
                                                                                        "this autorater")
    if meta["format"] != FORMAT:
        if not allow_unverified:
            raise fail(path, f"a pack of format {meta['format']!r} carries no checksum, so a change to it cannot be "
                             f"detected", "if you trust this pack, pass --allow-unverified (allow_unverified=True); "
                                          "or pack the suites again, which writes the checksums")
        return meta
    files = meta.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and _FILE.fullmatch(k) and ".." not in k and isinstance(v, dict) and set(v) == {
                "sha256", "bytes"} and isinstance(v["sha256"], str) and _SHA.fullmatch(v["sha256"])
            and type(v["bytes"]) is int and v["bytes"] >= 0 for k, v in files.items()):
        raise checks.field_error(path, "files", "not an object of the pack's files and their sha256 and bytes")
    if meta.get("checksum") != meta_sha256(meta):
        raise fail(path, "its content does not match the checksum saved in it (changed or damaged since `autorater "
                         "pack` wrote it)", REPACK)
    return meta


class Pack:
    """A pack folder (the package's docstring), checked as it is read (``checks.py``): ``pack.json`` when it is opened,
    the tensors, vectors and weights before training (``prepare``) or rating (``rate_held_out``); a
    :class:`~autorater.training.inputs.pack.files.PackError` (a ValueError: one line, the file, the field, the fix)
    otherwise. ``allow_unverified``: read a pack written before checksums (``autorater-pack-1``)."""

    def __init__(self, folder: str | Path, allow_unverified: bool = False):
        self.folder = Path(folder)
        self.meta = read_meta(self.folder, allow_unverified)
        self.rows = checks.check_meta(self.meta, self.folder / PACK_FILE)
        self.verified = self.meta["format"] == FORMAT
        self.weights: dict[str, Path] = {}  # encoder name -> its weights file, checked (``prepare``)
        self.vectors: dict[int, dict[str, torch.Tensor]] = {}  # token budget -> text -> vector, checked (``prepare``)

    @property
    def suite_names(self) -> list[str]:
        return list(self.meta["suite_names"])

    @property
    def sources(self) -> list[dict | None]:
        return list(self.meta["sources"])

    def _read(self, relative: str, expect) -> dict[str, torch.Tensor]:
        """A file of the pack, against its record in pack.json (an older pack's: as it is)."""
        if not self.verified:
            return read_tensors(self.folder, relative, expect)
        record = self.meta["files"].get(relative)
        if record is None:
            raise checks.field_error(self.folder / PACK_FILE, "files", f"no record of {relative!r}")
        return read_tensors(self.folder, relative, expect, record["sha256"], record["bytes"])

    def _file(self, *choices: str) -> str:
        """The one of ``choices`` the pack holds (a verified pack: recorded in pack.json)."""
        have = [c for c in choices if (c in self.meta["files"] if self.verified else (self.folder / c).exists())]
        if len(have) != 1:
            raise fail(self.folder / choices[0], "missing" if not have else f"both {' and '.join(have)}", REPACK)
        return have[0]

    @contextlib.contextmanager
    def installed(self):
        """For the block (the rest of a training run from this pack): the models built there read the pack's encoder
        weights and sentence vectors (those ``prepare`` checked) in place of the weights' and MiniLM's packages; after
        it, nothing in the process does."""
        from autorater.encoders import weights_from
        from autorater.models.parts.text import vectors_from

        with weights_from(self.weights), vectors_from(self.vectors):
            yield

    def weight_files(self, config: AutoraterConfig) -> dict[str, Path]:
        """The encoder weights ``config`` reads, checked in the pack (every tensor of the encoder's network, in its
        dtype and shape): encoder name -> its file, to be read in place of its package."""
        from autorater.encoders import frame_encoder_spec

        try:
            names = [config.encoder] if _has_weights(config.encoder) else []
        except ValueError as err:
            raise checks.field_error(self.folder / PACK_FILE, "model_config.encoder", str(err)) from None
        if sorted(self.meta["encoders"]) != names:
            raise checks.field_error(self.folder / PACK_FILE, "encoders", f"{self.meta['encoders']}; the config "
                                     f"reads the weights of {names}", "train with the --config the pack was written "
                                                                      "with, or pack the suites with it")
        files = {}
        for name in names:
            relative = f"{ENCODERS}/{name}.safetensors"
            with torch.device("meta"):
                net = frame_encoder_spec(name).network.create(None)
            shapes = {k: (v.dtype, tuple(v.shape)) for k, v in net.state_dict().items()}
            weights = self._read(relative, checks.weights_schema(self.folder / relative, shapes))
            missing = sorted(set(shapes) - set(weights))
            bad = next((k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())),
                       None)
            if missing or bad:
                raise fail(self.folder / relative, f"tensor {(missing or [bad])[0]!r} is missing or not finite",
                           REPACK)
            files[name] = self.folder / relative
        return files

    def _sentences(self, model: Autorater, texts: set[str]) -> dict[int, dict[str, torch.Tensor]]:
        """The pack's sentence vectors the model reads, checked: token budget -> text -> its vector."""
        from autorater.models.parts.text import sentence_budgets

        budgets = sentence_budgets(model)
        if not budgets:
            return {}
        path = self.folder / SENTENCES_FILE
        vectors = self._read(SENTENCES_FILE, checks.sentence_schema(path, budgets, max(1, len(texts))))
        checks.check_sentences(vectors, path, budgets, texts)
        return {budget: {k.partition("|")[2]: v for k, v in vectors.items() if k.startswith(f"{budget}|")}
                for budget in budgets}

    def _clips(self, model: Autorater, relative: str, rows: int, labels: bool) -> tuple[CachedClips, dict]:
        """The clips of ``rows`` rows the model reads, checked (shapes before reading, values after)."""
        path = self.folder / relative
        decoded = model.processor.decode_args(0.0)  # the frames a clip is decoded to (and those before a takeover)
        frames = decoded["num_frames"] + decoded.get("before", 0) + 1
        expect = checks.clip_schema(path, rows, frames, model.cached_shapes(), labels)
        t = self._read(relative, expect)
        checks.check_clips(t, path, expect.want)
        clips = CachedClips(t["features"], t["times_s"], t["durations_s"], model.frame_encoder.caches_frames, {},
                            encoded={k[len("encoded."):]: v for k, v in t.items() if k.startswith("encoded.")})
        return clips, t

    def prepare(self, model_config: AutoraterConfig, tc: TrainConfig,
                progress: bool = False) -> tuple[Autorater, TrainingData]:
        """``prepare``'s output from the pack: the model of ``model_config`` (its learned words and failure modes the
        pack's, built from ``tc.seed`` as ``prepare`` builds it) and the training data, checked to be what this model
        reads (the same cache key, every tensor's dtype and shape)."""
        meta, cfg, path = self.meta, model_config, self.folder / PACK_FILE
        learned = checks.model_config(meta["model_config"], path)
        if spec_of(cfg).learns_words(cfg) and not cfg.vocab:
            cfg = cfg.replace(vocab=list(meta["model_config"].get("vocab", [])))  # checked with the config
        if not cfg.failure_modes:
            cfg = cfg.replace(failure_modes=list(learned.failure_modes))
        self.weights = self.weight_files(cfg)
        with seeded(tc.seed), self.installed():  # its encoders' weights from the pack
            model = AutoModel.from_config(cfg)
        key = cache_key(model, not model.frame_encoder.caches_frames)
        if key != meta["cache_key"]:
            raise ValueError(f"{self.folder} holds the inputs of {meta['cache_key']!r}; this config reads {key!r} "
                             f"(fix: train with the --config the pack was written with, or pack the suites with it)")
        pixels = cfg.pixel_cells if model.frame_encoder.raw_colours else 0
        if meta["pixel_cells"] != pixels or meta["is_frames"] != model.frame_encoder.caches_frames:
            raise checks.field_error(path, "pixel_cells" if meta["pixel_cells"] != pixels else "is_frames",
                                     "not what the model reads")
        ex, relative = meta["examples"], self._file(CLIPS_FILE + COMPRESSED, CLIPS_FILE)
        clips, t = self._clips(model, relative, self.rows, labels=True)
        checks.check_labels(t, self.folder / relative, ex, list(cfg.failure_modes))
        data = TrainingData(Examples(**{k: list(v) for k, v in ex.items()}), clips, t["marker_index"],
                            t["failure_index"], pixel_cells=meta["pixel_cells"], decisive=frozenset(meta["decisive"]),
                            groups=meta["groups"], processor=model.processor, sources=meta["sources"],
                            suite_names=meta["suite_names"])
        held = {t for name in self.held_out_names for t in self._held(name)["instructions"]}
        self.vectors = self._sentences(model, set(training_texts(data, tc)) | held)  # every text it can ask
        give_vectors(model, self.vectors)  # the model keeps them: it rates the pack's held-out sets after the run
        return model, data

    @property
    def held_out_names(self) -> list[str]:
        """The held-out sets the pack holds (``write_pack(held_out=...)``)."""
        return list(self.meta.get("held_out", {}))

    def _held(self, name: str) -> dict:
        held = self.meta.get("held_out", {})
        if name not in held:
            raise KeyError(f"{self.folder} holds no held-out set {name!r}; it holds {sorted(held)}")
        checks.check_held_out(held[name], name, self.folder / PACK_FILE)
        return held[name]

    def rate_held_out(self, model: Autorater, name: str, batch_size: int = 64) -> list[dict]:
        """Prediction rows of every continuation of held-out set ``name`` by ``model`` (of the config the pack was
        written for), from its cached inputs (checked as the training clips are)."""
        held = self._held(name)
        relative = self._file(*(f"{HELD_OUT}/{name}/{clips_name(c)}" for c in (True, False)))
        clips, _ = self._clips(model, relative, len(held["ids"]), labels=False)
        clips.errors = {int(i): e for i, e in held["errors"].items()}
        return rate_clips(model, clips, held["ids"], held["instructions"], held["takeovers_s"], batch_size=batch_size)

    def truth(self, name: str) -> dict[str, int]:
        """Held-out set ``name``'s true outcomes, 1 = success (continuations with none left out)."""
        held = self._held(name)
        return {c: int(t == "success") for c, t in zip(held["ids"], held["truth"]) if t is not None}

    def scenarios(self, name: str) -> dict[str, str]:
        """Held-out set ``name``'s scenario of each continuation (what paired comparisons resample)."""
        held = self._held(name)
        return dict(zip(held["ids"], held["scenarios"]))


def _has_weights(name: str) -> bool:
    """Whether frame encoder ``name`` reads pretrained weights (from its package, or a pack)."""
    from autorater.encoders import frame_encoder_spec

    spec = frame_encoder_spec(name)
    return spec.network is not None and spec.network.load_weights is not None


__all__ = ["MAX_PACK_JSON", "Pack", "PackError", "read_meta"]
