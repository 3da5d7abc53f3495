"""What the labels say about the agents, from imperfect labels: success rates with honest intervals (``rates``:
Wilson, prediction-powered inference, Rogan-Gladen, corrected consistency and time to success) and agent ability
with scenario difficulty, measured jointly (``irt``: a 1PL/2PL item-response model).

The model-side calibration (scaling, the selective policy, agreement, drift) is the rest of ``autorater.calibration``;
these estimators sit beside it because the leaderboard (``autorater.serving.analysis``) needs both. Like the rest of
the package, torch-free (numpy, scipy, ``ppi_py``) and importing none of the project's other packages.
"""

from .irt import ItemResponseModel
from .rates import (
    bootstrap_interval,
    corrected_consistency,
    corrected_time_to_success,
    group_estimates,
    rate_estimate,
    rate_pooled,
    rate_vs_gold,
    wilson_interval,
)

__all__ = ["ItemResponseModel", "bootstrap_interval", "corrected_consistency", "corrected_time_to_success",
           "group_estimates", "rate_estimate", "rate_pooled", "rate_vs_gold", "wilson_interval"]
