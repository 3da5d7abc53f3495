"""Calibration: metrics, temperature scaling, agreement reports, the selective labelling policy, and (``agents``) the
estimators of agent success rates and abilities from imperfect labels.

Depends only on numpy, scipy, matplotlib (imported inside the plot functions) and krippendorff,
never on the project's other packages, so any of them can import it.
"""

from .agents.irt import ItemResponseModel
from .agents.rates import (
    bootstrap_interval,
    corrected_consistency,
    corrected_time_to_success,
    group_estimates,
    rate_estimate,
    rate_pooled,
    rate_vs_gold,
    wilson_interval,
)
from .agreement import agreement_report, format_agreement_table
from .audit import (
    CLAIMS,
    FIRST_SHARE_BY_STATUS,
    AuditDesign,
    StratumAudit,
    Verdict,
    audit_step,
    audited_agreement,
    certify_strata,
    design_audit,
    e_bh,
    log_evidence,
    model_weights,
    plan_strata,
    stratum_budgets,
)
from .compare import paired_comparison
from .drift import drift_check, mmd_test
from .marker import MarkerOffset
from .metrics import (
    auroc,
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
from .report import CalibrationRecord, read_calibration_json
from .selective import InsufficientReferencesError, SelectivePolicy, agreement_lower_bound, certifying_size
from .split import SplitCalibrator, cross_validated_calibration
from .temperature import TemperatureScaler

__all__ = [
    "FIRST_SHARE_BY_STATUS",
    "CalibrationRecord",
    "InsufficientReferencesError",
    "ItemResponseModel",
    "MarkerOffset",
    "SelectivePolicy",
    "SplitCalibrator",
    "TemperatureScaler",
    "agreement_report",
    "auroc",
    "bootstrap_ci",
    "bootstrap_interval",
    "brier_score",
    "corrected_consistency",
    "corrected_time_to_success",
    "cross_validated_calibration",
    "drift_check",
    "mmd_test",
    "CLAIMS",
    "AuditDesign",
    "StratumAudit",
    "Verdict",
    "audit_step",
    "audited_agreement",
    "certify_strata",
    "design_audit",
    "e_bh",
    "log_evidence",
    "model_weights",
    "plan_strata",
    "stratum_budgets",
    "agreement_lower_bound",
    "certifying_size",
    "expected_calibration_error",
    "failure_mode_metrics",
    "format_agreement_table",
    "group_estimates",
    "marker_metrics",
    "new_figure",
    "outcome_metrics",
    "paired_comparison",
    "plot_agreement_table",
    "plot_reliability",
    "plot_risk_coverage",
    "rank_metrics",
    "rate_estimate",
    "rate_pooled",
    "rate_vs_gold",
    "read_calibration_json",
    "reliability_curve",
    "wilson_interval",
]
