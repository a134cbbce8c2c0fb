"""Vector search on storage (MLPerf Storage v3 §5, issue 28): DiskANN / AISAQ hop chains emulated in C.

config.py (the vdb.* keys -> a VdbSpec), layout.py (DiskANN's on-disk index layout), model.py (the hop and
node-id model fitted to real DiskANN), trace.py (captures of real DiskANN and their replay), store.py (the
index files: write / keep / fetch; the seam an object-store backend plugs into), search.py (the C run),
metrics.py (summary.json and the verdict), job.py (`dlio-fast run --workload vdb_*` start to end).
"""
