"""Every job through one door: a workload family (training, KV cache, vector search, model loading) is a
table of hooks (family.Family), and one driver takes any of them through the same run (driver.run).
The families are listed in registry.py."""
