import numpy as np
from scipy.special import expit

from autorater.calibration import (
    SelectivePolicy,
    TemperatureScaler,
    agreement_report,
    plot_agreement_table,
    plot_reliability,
    plot_risk_coverage,
)


def test_plots_write_png_files(tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 6, 400)
    y = (rng.random(400) < expit(logits / 2)).astype(int)
    p = TemperatureScaler().fit(logits, y).predict_proba(logits)
    policy = SelectivePolicy(0.9, 0.9).fit(p, y)
    report = agreement_report(
        [f"c{i}" for i in range(40)], y[:40], np.full(40, np.nan), np.arange(40) // 4, np.arange(40) % 2,
        p[:40], np.full(40, np.nan), [(f"c{i}", "h1", int(y[i]), None) for i in range(40)], n_boot=50,
    )
    paths = [tmp_path / name for name in ("reliability.png", "risk_coverage.png", "agreement.png")]
    plot_reliability(expit(logits), p, y, paths[0])
    operating_point = (policy.expected_coverage_, 1 - policy.empirical_agreement_)
    plot_risk_coverage(policy.risk_coverage_curve(p, y), operating_point, paths[1])
    plot_agreement_table(report, paths[2])
    for path in paths:
        assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size > 1000
