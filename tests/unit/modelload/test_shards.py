"""The model's tensors and its safetensors shards: Llama 3 as Hugging Face publishes it, and files that
safetensors itself opens, with the expected tensors, and random (unique) content."""

import hashlib
import json
import os

import numpy as np
import pytest

from dlio.config import load_config
from dlio.config.sections import ModelLoadConfig
from dlio.modelload import models, shards
from dlio.modelload.store import StoredModel
from dlio.storage.files import FileBackend

safetensors = pytest.importorskip("safetensors", reason="pip install safetensors (the test extra)")
from safetensors import safe_open  # noqa: E402

NOENV = {}


@pytest.fixture(autouse=True)
def no_stale_stop_signal():
    """An earlier in-process test's stop signal (dlio.system.execute keeps it for its run's late note) must
    not stop the C runs these tests start outside any run."""
    from dlio.system import execute

    execute._SIGNALLED.clear()
    execute.STOP.clear()


TINY = [
    "model_load.model=transformer",
    "model.num_layers=3",
    "model.transformer.hidden_size=256",
    "model.transformer.ffn_hidden_size=768",
    "model.transformer.vocab_size=1000",
    "model.transformer.num_attention_heads=8",
    "model.transformer.num_kv_heads=2",
    "model_load.shard_size=1000000",
]


def tiny(*extra):
    return load_config(workload="load_llama3_8b", env=NOENV, sets=TINY + list(extra))


# Hugging Face's model.safetensors.index.json "metadata": {"total_size": ...} and the shard count of
# meta-llama/Meta-Llama-3-8B, Meta-Llama-3-70B and Llama-3.1-405B (bf16).
PUBLISHED = {"llama3_8b": (16060522496, 4), "llama3_70b": (141107412992, 30), "llama3_405b": (None, 191)}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_llama3_sizes_and_shards_as_published(name):
    cfg = load_config(workload=f"load_{name}", env=NOENV)
    m = models.model_of(cfg)
    total, nshards = PUBLISHED[name]
    if total is not None:
        assert m.nbytes == total
    layout = shards.layout(m, cfg.section(ModelLoadConfig).shard_size)
    assert len(layout) == nshards
    assert all(s.size - len(s.header) <= 5 * 10**9 for s in layout)
    # parameters from the config by hand: embeddings and lm_head, per layer q k v o, 3 mlp, 2 norms
    c = m.config
    hd = c["hidden"] // c["heads"]
    per_layer = (
        2 * c["hidden"] * c["heads"] * hd
        + 2 * c["hidden"] * c["kv_heads"] * hd
        + 3 * c["hidden"] * c["ffn"]
        + 2 * c["hidden"]
    )
    assert m.parameters == 2 * c["vocab"] * c["hidden"] + c["layers"] * per_layer + c["hidden"]


def test_llama3_8b_first_layer_names_and_shapes():
    m = models.model_of(load_config(workload="load_llama3_8b", env=NOENV))
    shapes = {t.name: t.shape for t in m.tensors}
    assert shapes["model.embed_tokens.weight"] == (128256, 4096)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (4096, 4096)
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (1024, 4096)
    assert shapes["model.layers.31.mlp.down_proj.weight"] == (4096, 14336)
    assert shapes["model.norm.weight"] == (4096,)
    assert shapes["lm_head.weight"] == (128256, 4096)
    assert len(shapes) == 2 + 32 * 9 + 1


def test_generic_model_holds_its_bytes():
    cfg = load_config(workload="load_model", env=NOENV, sets=["model_load.model_bytes=1000000000"])
    m = models.model_of(cfg)
    row = 4096 * 2
    assert m.nbytes == 1000000000 // row * row
    assert all(t.shape[1] == 4096 for t in m.tensors)


def _write(tmp_path, cfg):
    m = models.model_of(cfg)
    layout = shards.layout(m, cfg.section(ModelLoadConfig).shard_size)
    st = StoredModel(FileBackend(), str(tmp_path / "m"), layout, shards.index_text(m, layout))

    class One:
        rank, size = 0, 1

        def barrier(self):
            pass

    assert not st.present()
    st.write(One(), lambda *_: None)
    assert st.present()
    return m, layout, st


@pytest.mark.parametrize("dtype, np_dtype", [("bf16", None), ("fp16", np.float16), ("fp32", np.float32)])
def test_shards_open_with_safetensors_and_carry_the_tensors(tmp_path, dtype, np_dtype):
    cfg = tiny(f"model_load.dtype={dtype}")
    m, layout, st = _write(tmp_path, cfg)
    assert len(layout) > 2
    want = {t.name: t.shape for t in m.tensors}
    seen = {}
    index = json.loads((tmp_path / "m" / shards.INDEX).read_text())
    assert index["metadata"]["total_size"] == m.nbytes
    for path, s in zip(st.names, layout):
        assert os.path.getsize(path) == s.size
        with safe_open(path, framework="np") as f:
            assert f.metadata() == {"format": "pt"}
            for name in f.keys():
                sl = f.get_slice(name)
                seen[name] = tuple(sl.get_shape())
                assert sl.get_dtype() == models.DTYPES[dtype][0]
                assert index["weight_map"][name] == os.path.basename(path)
                if np_dtype is not None:  # numpy has no bfloat16
                    t = f.get_tensor(name)
                    assert t.dtype == np_dtype and t.shape == want[name]
                    _, b, e = next(x for x in s.tensors if x[0].name == name)
                    with open(path, "rb") as raw:
                        raw.seek(b)
                        assert t.tobytes() == raw.read(e - b)
    assert seen == want


def test_tensor_bytes_are_unique_blocks(tmp_path):
    """Random tensors: no 4 KiB block of the data repeats (nothing for a deduplicating store to fold)."""
    _, layout, st = _write(tmp_path, tiny())
    digests = []
    for path, s in zip(st.names, layout):
        data = open(path, "rb").read()[len(s.header) :]
        digests += [hashlib.sha1(data[i : i + 4096]).digest() for i in range(0, len(data) - 4095, 4096)]
    assert len(digests) > 100 and len(set(digests)) == len(digests)


def test_a_changed_model_is_not_present(tmp_path):
    _, _, _ = _write(tmp_path, tiny())
    m = models.model_of(tiny("model.num_layers=4"))
    layout = shards.layout(m, 1000000)
    assert not StoredModel(FileBackend(), str(tmp_path / "m"), layout, shards.index_text(m, layout)).present()
