"""A portable pack of training inputs: what ``prepare`` makes of suites, written once where the videos, decord and the
weight packages are, and trained from anywhere torch runs (a lent GPU machine has none of them).

    autorater pack --suite S [--suite S2 ...] [--config C] --out PACK          # decode, label, encode, write
    autorater train --from-pack PACK [--config C] --out MODEL --device cuda      # the same training, from the pack

A pack is a folder:

- ``pack.json``: the model config it was encoded for (its learned words and failure modes), the examples with their
  labels, the split groups, the suites' names and sources, each file's SHA-256 and size (``files``) and its own
  checksum (``checksum``);
- ``clips.safetensors.xz``: the feature cache's entries of every row, as ``FeatureCache.load`` returns them, and the
  label indices: a safetensors file compressed as an xz stream (``xz -d`` gives it back; ``write_pack(compress=False)``
  or a pack of format ``autorater-pack-1`` holds ``clips.safetensors`` as it is). The bars' BabyAI training suite
  (2,000 continuations) packs into 24.6 MiB where it took 450.4 MiB, and is read back in a stream into tensors
  allocated once (``files.py``);
- ``sentences.safetensors``: the frozen sentence vectors of every instruction the training can ask for;
- ``encoders/<name>.safetensors``: each pretrained frame encoder's weights, from its package;
- ``held_out/<name>/clips.safetensors.xz`` (optional): held-out sets to rate where the pack trains (benchmarks).

Safetensors and JSON only: reading a pack runs no code. A pack someone hands you is checked whole before anything
trains on it (``checks.py``: every field, every tensor, the checksums; nothing read through a symbolic link or from a
FIFO), each refusal one line naming the file, the field and the fix (``PackError``). Training from it is ``train``
itself on the same inputs: a model trained from a pack is the model trained from the suites, compressed or not (tests
say so), and ``outcome.blocks`` 6 trains the whole encoder from the frames the pack holds. What the training machine
needs is :data:`NEEDS` and the product (``autorater pack`` prints it; a test blocks every other package).

Example:
    >>> write_pack([Suite.load("suite")], PRESETS["general"].replace(outcome_blocks=6), TrainConfig(), "pack")
    ...                                                                                      # doctest: +SKIP
    >>> result = train(Pack("pack"), PRESETS["general"].replace(outcome_blocks=6), TrainConfig(device="cuda"))
    ...                                                                                      # doctest: +SKIP
"""

from autorater.training.inputs.pack.files import PackError
from autorater.training.inputs.pack.folder import FORMAT, NEEDS, PACK_FILE, sentence_vectors, training_texts, write_pack
from autorater.training.inputs.pack.reader import Pack

__all__ = ["FORMAT", "NEEDS", "PACK_FILE", "Pack", "PackError", "sentence_vectors", "training_texts", "write_pack"]
