"""The tolerances of qr_v2's numeric gates and their unit, in the units of the scaled residuals the store keeps (no
torch here: the dashboard and the analysis read them)."""

EPS32 = 2.0**-23  # float32's machine epsilon, the unit of both gates
FACTOR_TOL = 20.0  # x n x eps32 x ||A||_1
ORTH_TOL = 100.0  # x n x eps32
# case_results column of a gate's scaled residual -> the gate's tolerance on it.
GATES = {"factor_res": FACTOR_TOL, "orth_res": ORTH_TOL}
