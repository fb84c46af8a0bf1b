"""The tolerances of qr_v2's numeric gates, in the units of the scaled residuals the store keeps (no torch here:
the dashboard and the analysis read them)."""

FACTOR_TOL = 20.0  # x n x eps32 x ||A||_1
ORTH_TOL = 100.0  # x n x eps32
# case_results column of a gate's scaled residual -> the gate's tolerance on it.
GATES = {"factor_res": FACTOR_TOL, "orth_res": ORTH_TOL}
