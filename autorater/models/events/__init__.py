"""The events architecture (``architecture="events"``, preset ``babyai-grid``) and the event stream it shares with the
general model: ``model`` (config, model and spec), ``stream`` (per-frame event heads chained into the clip's
outcome, marker and failure mode), ``head`` (per-frame events, competing risks, instruction match), ``pose`` (dead
reckoning of the first-person agent), ``mirror`` (left-right mirrors of cells and words)."""

from autorater.models.events.model import SPEC, EventsConfig, EventsModel, event_loss_space, place_priors

__all__ = ["SPEC", "EventsConfig", "EventsModel", "event_loss_space", "place_priors"]
