"""The schema's rows, one module per family that owns them: DLIO's own sections (dlio), dlio-fast's
section and its additions to DLIO's (dlio_fast), and the workload families' sections with their
``workflow.<name>`` flag (kvcache, model_load, vdb).  ``dlio.config.schema`` gathers them into ``KEYS``."""
