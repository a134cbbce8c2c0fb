"""The schema's rows of DLIO's own sections (dlio) and of dlio-fast's section and its additions to DLIO's
(dlio_fast).  Each workload family keeps its section's rows and its ``workflow.<name>`` flag in its own
package (``dlio/<family>/keys.py``, found by ``dlio.config.families``).  ``dlio.config.schema`` gathers them
all into ``KEYS``."""
