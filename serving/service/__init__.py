"""``autorater serve``: the model over HTTP, and the Label Studio endpoints it offers.

- ``app``: the FastAPI application (``create_app``): rating a video, health, the endpoints' limits.
- ``guard``: the guards in front of it: limits held at the connection, before the application sees a request.
- ``rating``: the model behind it: one prediction at a time, a bounded number at once, one deadline.
- ``mlbackend``: the Label Studio ML-backend adapter (``/setup``, ``/predict``).
- ``webhook``: the Label Studio webhook that writes the pool suite's labels (``/webhook``).

It is the top of serving: it uses the labelling job's folders and history and the Label Studio formats, and nothing
in serving imports it.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.serving.service.app": ["create_app"],
    "autorater.serving.service.guard": ["ConnectionLimits", "server_config"],
    "autorater.serving.service.rating": ["RatingSlots", "ServiceRater"],
})
