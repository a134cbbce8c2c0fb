"""The .pt files a save writes are torch.save's zip container, checked without torch: zipfile reads
the records, pickle (with stand-ins for torch's classes) reads data.pkl, and what they hold is
compared with DLIO's state dicts computed here from its formulas.  test_torchzip_torch.py checks
the same files with torch itself."""

import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

from dlio import _core
from dlio.checkpoint import save as ckpt_save
from dlio.checkpoint import torchzip
from dlio.checkpoint.layout import plan_checkpoint
from dlio.checkpoint.transfers import TransferOptions
from dlio.config import load_config

STORAGE_DTYPE = {"CharStorage": "int8", "HalfStorage": "fp16", "FloatStorage": "fp32", "BFloat16Storage": "bf16"}
ITEMSIZE = {"int8": 1, "fp16": 2, "fp32": 4, "bf16": 2}


class _Tensor:
    def __init__(self, pid, offset, size, stride, requires_grad, hooks):
        tag, cls, self.key, self.location, self.numel = pid
        assert tag == "storage" and isinstance(cls, _StorageClass)
        self.dtype = STORAGE_DTYPE[cls.name]
        self.offset, self.size, self.stride = offset, size, stride
        assert requires_grad is False and hooks == {}


class _StorageClass:
    """A stand-in for torch.<Dtype>Storage: pickle only passes the class around in the storage id."""

    def __init__(self, name):
        self.name = name


class _Unpickler(pickle.Unpickler):
    """data.pkl with the three globals torch's pickle names replaced by stand-ins."""

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _Tensor
        if module == "torch" and name in STORAGE_DTYPE:
            return _StorageClass(name)
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")

    def persistent_load(self, pid):
        return pid


def read_pt(path):
    """(state with _Tensor leaves, zipfile infos): the container checked on the way."""
    z = zipfile.ZipFile(path)
    infos = z.infolist()
    names = [i.filename for i in infos]
    nstor = sum(n.startswith("archive/data/") for n in names)
    assert names == [
        "archive/data.pkl",
        "archive/.format_version",
        "archive/.storage_alignment",
        "archive/byteorder",
        *[f"archive/data/{k}" for k in range(nstor)],
        "archive/version",
        "archive/.data/serialization_id",
    ]
    assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
    with open(path, "rb") as f:
        for i in infos:  # every record's bytes start on a 64-byte boundary, as torch.save aligns them
            f.seek(i.header_offset + 26)
            nlen, elen = struct.unpack("<HH", f.read(4))
            assert (i.header_offset + 30 + nlen + elen) % 64 == 0, i.filename
        f.seek(-22, os.SEEK_END)
        assert f.read(4) == b"PK\x05\x06"  # the end record closes the file: nothing after it
    # the small records are read through zipfile, which checks their CRC-32
    assert z.read("archive/byteorder") == b"little" and z.read("archive/version") == b"3\n"
    assert z.read("archive/.storage_alignment") == b"64" and z.read("archive/.format_version") == b"1"
    assert len(z.read("archive/.data/serialization_id")) == 40
    state = _Unpickler(z.open("archive/data.pkl")).load()
    return state, {i.filename: i for i in infos}


def shape_of(state):
    """{key: (dtype, numel) or nested} of an unpickled state, each tensor checked as torch wants it."""
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out[k] = shape_of(v)
        else:
            assert v.offset == 0 and v.size == (v.numel,) and v.stride == (1,) and v.location == "cpu"
            out[k] = (v.dtype, v.numel)
    return out


def tensors_in_order(state, seen=None):
    """The distinct tensors in pickling order (storage keys must run 0, 1, ... in it)."""
    seen = set() if seen is None else seen
    out = []
    for v in state.values():
        if isinstance(v, dict):
            if id(v) not in seen:
                seen.add(id(v))
                out += tensors_in_order(v, seen)
        else:
            out.append(v)
    return out


def check_storages(state, infos):
    tensors = tensors_in_order(state)
    assert [t.key for t in tensors] == [str(k) for k in range(len(tensors))]
    for t in tensors:
        assert infos[f"archive/data/{t.key}"].file_size == t.numel * ITEMSIZE[t.dtype]
    return tensors


# --------------------------------------------------------------------------------------------------
# DLIO's state dicts, from its base_checkpointing.py formulas (written out here, not from layout.py)


def transformer_states(L, H, FFN, V, heads, kv, zero, mdt, odt):
    """(model file state, optimizer file state) of one rank, TP = PP = DP = 1."""
    dkv = H // heads * kv
    per_layer = [H, H * (H + 2 * dkv), H * H, H, H * 2 * FFN, H * FFN]
    model = {"0": {"0": (mdt, H * V)}}
    for i in range(1, L + 1):
        model[str(i)] = {str(j): (mdt, p) for j, p in enumerate(per_layer)}
    model[str(L + 1)] = {"0": (mdt, H * V)}
    model[str(L + 2)] = {"0": (mdt, H)}
    nparam = 2 * V * H + L * sum(per_layer) + H
    opt = {str(j): (odt, g) for j, g in enumerate([nparam, 5 * H] * 3)}
    return model, opt


def small_cfg(tmp, **sets):
    base = {
        "framework": "pytorch",
        "model.type": "transformer",
        "model.num_layers": 2,
        "model.transformer.hidden_size": 128,
        "model.transformer.ffn_hidden_size": 384,
        "model.transformer.vocab_size": 500,
        "model.transformer.num_attention_heads": 4,
        "model.transformer.num_kv_heads": 2,
        "model.parallelism.zero_stage": 1,
        "model.model_datatype": "fp16",
        "model.optimizer_datatype": "fp32",
        "checkpoint.checkpoint_folder": str(tmp),
        "workflow.checkpoint": "true",
        "workflow.train": "false",
    }
    base.update(sets)
    return load_config(sets=[f"{k}={v}" for k, v in base.items()], env={})


@pytest.mark.parametrize("mdt,odt,zero", [("fp16", "fp32", 1), ("bf16", "fp32", 3), ("fp32", "fp16", 1)])
def test_transformer_files_are_torch_zips(tmp_path, mdt, odt, zero):
    cfg = small_cfg(
        tmp_path / "ck",
        **{"model.model_datatype": mdt, "model.optimizer_datatype": odt, "model.parallelism.zero_stage": zero},
    )
    plan = plan_checkpoint(cfg, 0, 1)
    ckpt_save.save(cfg, None, 1, 3, TransferOptions(transfer=1 << 20))
    folder = tmp_path / "ck" / "global_epoch1_step3"
    want_model, want_opt = transformer_states(2, 128, 384, 500, 4, 2, zero, mdt, odt)
    model_name = "model_0_model_states.pt" if zero == 1 else "zero_pp_rank_0_mp_rank_0_model_states.pt"
    want = {model_name: want_model, "zero_pp_rank_0_mp_rank_0_optim_states.pt": want_opt}
    assert sorted(os.listdir(folder)) == sorted(want)
    for f in plan.files:
        path = folder / f.name
        state, infos = read_pt(path)
        assert shape_of(state) == want[f.name]
        tensors = check_storages(state, infos)
        assert f.tensor_bytes == sum(t.numel * ITEMSIZE[t.dtype] for t in tensors)
        assert os.path.getsize(path) == f.nbytes  # the plan's size is the size on disk
        # the container costs a few hundred bytes per tensor, as torch's does (DLIO comparison in
        # test_torchzip_torch.py)
        assert 0 < f.nbytes - f.tensor_bytes < 1024 + 400 * len(tensors)


def test_legacy_states_shared_dict_and_groups(tmp_path):
    # DLIO's legacy layer_parameters: the same dict under every layer (stored once);
    # optimization_groups: {group: {"a", "b"}} plus "combined"; model_size: {"a": int8}
    cfg = load_config(
        sets=[
            "framework=pytorch",
            "model.num_layers=3",
            "model.layer_parameters=[16,0,40]",
            "model.optimization_groups=[100,0,28]",
            "model.model_size=2048",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
            "workflow.checkpoint=true",
            "workflow.train=false",
        ],
        env={},
    )
    plan = plan_checkpoint(cfg, 0, 1)
    ckpt_save.save(cfg, None, 1, 1)
    folder = tmp_path / "ck" / "global_epoch1_step1"
    layer = {"0": ("int8", 16), "2": ("int8", 40)}
    want = {
        "model_states-0.pt": {"a": ("int8", 2048)},
        "zero_pp_rank_0_mp_rank_0_model_states.pt": {str(i): layer for i in (1, 2, 3)},
        "zero_pp_rank_0_mp_rank_0_optim_states.pt": {
            "0": {"a": ("int8", 100), "b": ("int8", 100)},
            "2": {"a": ("int8", 28), "b": ("int8", 28)},
            "combined": ("int8", 128),
        },
    }
    assert sorted(f.name for f in plan.files) == sorted(want)
    for f in plan.files:
        state, infos = read_pt(folder / f.name)
        assert shape_of(state) == want[f.name]
        tensors = check_storages(state, infos)
        if "model_states.pt" in f.name:  # one dict object under all three layers: two storages
            assert state["1"] is state["2"] is state["3"] and len(tensors) == 2
        assert os.path.getsize(folder / f.name) == f.nbytes


def test_zip64_records_past_4gib(tmp_path):
    # a tensor of more than 4 GiB and records past 4 GiB: zip64 fields, as torch writes them
    # (written sparse: only the container's bytes)
    tree = {"0": 100, "1": (1 << 32) + 5, "2": 7, "3": 0, "4": 9}
    tf = torchzip.container(torchzip.signature(tree), "int8")
    path = tmp_path / "big.pt"
    with open(path, "wb") as f:
        f.truncate(tf.size)
        for off, seg in tf.segments:
            f.seek(off)
            f.write(seg)
    state, infos = read_pt(path)
    assert shape_of(state) == {k: ("int8", n) for k, n in tree.items()}
    assert state["1"].numel == (1 << 32) + 5  # pickled as LONG1
    assert infos["archive/data/1"].file_size == (1 << 32) + 5
    assert infos["archive/data/2"].header_offset > 1 << 32
    assert [s for _, s in tf.storages] == [100, (1 << 32) + 5, 7, 0, 9]
    assert tf.size == os.path.getsize(path) and tf.tensor_bytes == sum(tree.values())


def test_container_cached_per_shape():
    a = torchzip.signature({"0": {"0": 5}, "1": {"0": 5}})
    b = torchzip.signature({"0": {"0": 5}, "1": {"0": 5}})
    assert a == b and torchzip.container(a, "fp16") is torchzip.container(b, "fp16")
    shared = {"0": 5}
    assert torchzip.signature({"0": shared, "1": shared}) == ("d", (("0", ("d", (("0", 5),))), ("1", ("r", 1))))
    with pytest.raises(ValueError, match="dtype"):
        torchzip.container(a, "int4")


# --------------------------------------------------------------------------------------------------
# the C core's literal ranges (file_overlay)


def _engines():
    ok = {n: good for n, _, good, _ in _core.engines()}
    return [e for e in ("posix", "io_uring") if ok.get(e)]


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("fill", [None, 0x0101010101010101])
def test_overlay_lands_in_the_requests(tmp_path, engine, direct, fill):
    # two files of 5 requests of 64 KiB; ranges inside one request, across a request boundary, at
    # the start and at the end; with a fill pattern, requests after an overlaid one keep the pattern
    req, n = 1 << 16, 5
    size = req * n
    segs = [
        [(0, b"HEAD" * 10), (req - 3, b"ACROSS"), (3 * req + 100, b"MID"), (size - 7, b"TAILEND")],
        [(2 * req, b"X" * 100)],
    ]
    paths = [str(tmp_path / f"f{i}") for i in range(2)]
    ops = np.zeros(2 * n, dtype=_core.OP_DTYPE)
    ops["file"] = np.repeat([0, 1], n)
    ops["op"] = _core.OP_WRITE
    ops["offset"] = np.tile(np.arange(n, dtype=np.uint64) * req, 2)
    ops["length"] = req
    run = _core.Run(
        "io",
        engine,
        paths,
        ops,
        threads=1,
        qd=2 if engine == "io_uring" else 1,
        direct=direct,
        file_fill=None if fill is None else [fill, fill],
        file_overlay=segs,
    )
    try:
        run.execute()
    except _core.RunError as e:  # pragma: no cover - a filesystem without O_DIRECT
        if direct:
            pytest.skip(f"O_DIRECT not available here: {e}")
        raise
    for p, ss in zip(paths, segs):
        raw = np.fromfile(p, dtype=np.uint8)
        assert raw.size == size
        literal = np.zeros(size, dtype=bool)
        for off, data in ss:
            assert raw[off : off + len(data)].tobytes() == data
            literal[off : off + len(data)] = True
        if fill is not None:
            assert np.all(raw[~literal] == 1)


def test_overlay_rejects_overlap(tmp_path):
    ops = np.zeros(1, dtype=_core.OP_DTYPE)
    ops["op"] = _core.OP_WRITE
    ops["length"] = 4096
    with pytest.raises(ValueError, match="overlapping"):
        _core.Run("io", "posix", [str(tmp_path / "f")], ops, file_overlay=[[(0, b"abcd"), (2, b"xy")]])
    with pytest.raises(ValueError, match="one entry per path"):
        _core.Run("io", "posix", [str(tmp_path / "f")], ops, file_overlay=[])
