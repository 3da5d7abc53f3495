"""The instruction as frozen sentence vectors, a part both architectures read (the general model's stream and outcome
path; the grid recipe with ``text_encoder`` "minilm").

Example:
    >>> SentenceText().out_dim
    1152
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autorater.encoders import tokenize_words

_MINILM: dict = {}  # max_tokens -> the frozen MiniLM (autorater.encoders.MiniLM), built on first use
_GIVEN: dict[int, dict[str, torch.Tensor]] = {}  # max_tokens -> instruction -> its vector, given (a pack's)


def give_vectors(max_tokens: int, vectors: dict[str, torch.Tensor]) -> None:
    """Sentence vectors computed elsewhere (a pack's, ``autorater.training.pack``), read before MiniLM is asked: a
    machine without MiniLM's package trains on the instructions they cover."""
    _GIVEN.setdefault(max_tokens, {}).update(vectors)


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

    @torch.no_grad()
    def _vector(self, texts: list[str]) -> torch.Tensor:
        if not self._encoder:
            from autorater.encoders import MiniLM

            if self.max_tokens not in _MINILM:  # one frozen MiniLM per process, shared by every head that reads
                _MINILM[self.max_tokens] = MiniLM(self.max_tokens)
            self._encoder.append(_MINILM[self.max_tokens])
        tokens, mask = self._encoder[0](texts)
        mean = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return F.normalize(mean, dim=-1)

    def forward(self, texts: list[str]) -> torch.Tensor:
        given = _GIVEN.get(self.max_tokens, {})
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


__all__ = ["SentenceText", "give_vectors"]
