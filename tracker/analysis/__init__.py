"""Analysis: statistics over recorded runs (comparisons, change points) and the series they need."""
