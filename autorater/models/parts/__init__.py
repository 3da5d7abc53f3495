"""The parts the architectures are composed of, each an ``nn.Module`` (as transformers builds a composite model of
sub-models): the event stream (``stream``: per-frame event heads chained by competing risks over frames, ``risks``),
the outcome path (``outcome``: P(success) from a few larger frames, with its own config), and the frozen sentence
vectors both read (``text``). The general model is the stream and the outcome path, joined by a gate; the grid
recipe is the stream on tile cells."""

from autorater.models.parts.outcome import OutcomeConfig, OutcomeHead, OutcomePath
from autorater.models.parts.stream import EventStream, event_classes
from autorater.models.parts.text import SentenceText

__all__ = ["EventStream", "OutcomeConfig", "OutcomeHead", "OutcomePath", "SentenceText", "event_classes"]
