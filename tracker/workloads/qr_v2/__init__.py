"""The GPU Mode qr_v2 workload (qr_v2_spec.md): suites, input recipe, gates."""
