"""The KV-cache offload workload of MLPerf Storage v3 (rules section 6): the reference benchmark's
(mlcommons/storage kv_cache_benchmark) users, conversations, tiers and I/O, emulated by the C core.

  models.py    the model table: KV bytes per token
  settings.py  the config's kvcache.* keys checked and resolved (sizes, defaults, the folder)
  plan.py      synthetic users -> the request plan (numpy, from the seed)
  traces.py    the reference's --io-trace-log CSV, Mooncake JSONL, ShareGPT JSON -> a request plan
  engine.py    one trial of one rank through the C engine (GIL released once)
  metrics.py   a trial's C result -> the reference's result dict and dlio-fast's exact figures;
               ranks and trials aggregated as the rules say
  oplog.py     the C operation log <-> the reference's --io-trace-log CSV; op-mix statistics
  attest.py    did fsync and fadvise reach the kernel? (interposed symbols, LD_PRELOAD, diskstats,
               mincore after the drop)
  results.py   the files of a run: per rank and trial, summary.json, dlio-fast.json; console lines
  check.py     `dlio-fast check` of a kvcache run folder
  job.py       `dlio-fast run` of a kvcache workload, start to end, on every rank
"""
