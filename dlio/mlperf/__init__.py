"""MLPerf Storage: its rules (rules.py), the dataset-size rule (datasize.py), the accelerator search (maxacc.py),
the checks of runs under each rules version (checks.py: v2.0 in checks_v2.py, v3.0 in checks_v3.py) and the
results tree with provenance (provenance.py)."""
