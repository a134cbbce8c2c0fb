"""MLPerf Storage: its rules (rules.py), the dataset-size rule (datasize.py), the accelerator search (maxacc.py)."""
