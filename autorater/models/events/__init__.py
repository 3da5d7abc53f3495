"""The events architecture (``architecture="events"``, preset ``babyai-grid``) and the event head it shares with the
general model: ``model`` (config and model), ``head`` (per-frame events, competing risks, instruction match),
``pose`` (dead reckoning of the first-person agent), ``mirror`` (left-right mirrors of cells and words)."""

from autorater.models.events.model import EventsConfig, EventsModel, event_loss_space, place_priors

__all__ = ["EventsConfig", "EventsModel", "event_loss_space", "place_priors"]
