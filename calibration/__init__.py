"""Calibration: metrics, temperature scaling, agreement reports and the selective labelling policy.

Depends only on numpy, scipy, matplotlib (imported inside the plot functions) and krippendorff,
never on the project's other packages, so any of them can import it.
"""

from .agreement import agreement_report, format_agreement_table
from .compare import paired_comparison
from .drift import drift_check
from .irt import ItemResponseModel
from .marker import MarkerOffset
from .metrics import (
    bootstrap_ci,
    brier_score,
    expected_calibration_error,
    failure_mode_metrics,
    marker_metrics,
    outcome_metrics,
    rank_metrics,
    reliability_curve,
)
from .plots import new_figure, plot_agreement_table, plot_reliability, plot_risk_coverage
from .report import CalibrationRecord
from .selective import InsufficientReferencesError, SelectivePolicy
from .split import SplitCalibrator, cross_validated_calibration
from .temperature import TemperatureScaler

__all__ = [
    "CalibrationRecord",
    "InsufficientReferencesError",
    "ItemResponseModel",
    "MarkerOffset",
    "SelectivePolicy",
    "SplitCalibrator",
    "TemperatureScaler",
    "agreement_report",
    "bootstrap_ci",
    "brier_score",
    "cross_validated_calibration",
    "drift_check",
    "expected_calibration_error",
    "failure_mode_metrics",
    "format_agreement_table",
    "marker_metrics",
    "new_figure",
    "paired_comparison",
    "outcome_metrics",
    "plot_agreement_table",
    "plot_reliability",
    "plot_risk_coverage",
    "rank_metrics",
    "reliability_curve",
]
