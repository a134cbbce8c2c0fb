"""`dlio-fast profile`: capture a training job's file I/O (capture), read it or an existing trace
into one event array (parsers), infer the workload (analyze), write DLIO's YAML and a report (emit),
and score a replay against the original (compare)."""
