"""Model loading (workflow.model_load): how long until a model's weights are ready to serve.

``models`` (tensors from the model's config), ``shards`` (safetensors files as Hugging Face publishes
them), ``plan`` (what each rank reads, per read mode), ``store`` (the shards on the storage backend),
``run`` (the loads, timed, and the result), ``figures`` (time to ready, GiB/s, faults, verdicts).
"""
