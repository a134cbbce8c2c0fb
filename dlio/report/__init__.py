"""Results: the typed record of a run, DLIO's result files, the figures computed from them,
comparisons, MLPerf-style checks, plots, the HTML page and the trace."""
