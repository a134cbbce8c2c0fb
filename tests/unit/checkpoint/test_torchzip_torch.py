"""The .pt files against torch and DLIO themselves (dlio-fast does not import torch: these run the
python of a DLIO install, which has torch, in a subprocess; they skip without one).

* torch.load(weights_only=True) opens what a save wrote, with DLIO's keys, dtypes and shapes;
* the container's bytes equal torch.save's (torch 2.13) but for the data records' CRC-32 (0, as
  torch.serialization.set_crc32_options(False) writes it) and the random serialization_id;
* current DLIO's own checkpoint files have the sizes on disk the plan gives (file by file)."""

import json
import os
import struct
import subprocess
import textwrap

import pytest
from dlio_installs import dlio_python, needs_dlio
from test_torchzip import small_cfg, transformer_states

from dlio.checkpoint import save as ckpt_save
from dlio.checkpoint import torchzip
from dlio.checkpoint.layout import plan_checkpoint
from dlio.checkpoint.transfers import TransferOptions
from dlio.config import load_config

TORCH_DTYPE = {"int8": "torch.int8", "fp16": "torch.float16", "bf16": "torch.bfloat16", "fp32": "torch.float32"}


def run_py(version, script, *args, cwd=None, timeout=300):
    py = dlio_python(version)
    r = subprocess.run(
        [py, "-c", textwrap.dedent(script), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


LOAD = """
    import json, sys, torch
    def shape(v):
        if isinstance(v, dict):
            return {k: shape(w) for k, w in v.items()}
        ones = bool((v == 1).all()) if v.numel() else True
        return [str(v.dtype), list(v.shape), ones, v.numel() > 0 and bool(torch.isfinite(v.float()).any())]
    out = {}
    for p in sys.argv[1:]:
        st = torch.load(p, weights_only=True)
        out[p] = {"state": shape(st), "shared": [k for k in st if isinstance(st[k], dict) and st[k] is st.get("1")]}
    print(json.dumps(out))
"""


def torch_shapes(paths):
    return json.loads(run_py("2.0.0", LOAD, *paths))


def as_torch(tree, ones):
    """DLIO's state (dtype, numel leaves) the way the LOAD script reports it."""
    return {
        k: as_torch(v, ones) if isinstance(v, dict) else [TORCH_DTYPE[v[0]], [v[1]], ones, True]
        for k, v in tree.items()
    }


def strip(t):
    return {k: strip(v) if isinstance(v, dict) else v[:2] for k, v in t.items()}


def leaves(t):
    return [x for v in t.values() for x in (leaves(v) if isinstance(v, dict) else [v])]


def legacy_cfg(folder):
    return load_config(
        sets=[
            "framework=pytorch",
            "model.num_layers=2",
            "model.layer_parameters=[16,40]",
            "model.optimization_groups=[100,28]",
            "model.model_size=4096",
            "checkpoint.randomize_tensor=false",
            f"checkpoint.checkpoint_folder={folder}",
            "workflow.checkpoint=true",
            "workflow.train=false",
        ],
        env={},
    )


@needs_dlio("2.0.0")
def test_torch_load_opens_saved_files(tmp_path):
    # transformer states with random and with ones content, and DLIO's legacy states; one torch run
    cfgs = {
        "random": small_cfg(tmp_path / "random"),
        "ones": small_cfg(tmp_path / "ones", **{"checkpoint.randomize_tensor": "false"}),
        "legacy": legacy_cfg(tmp_path / "legacy"),
    }
    paths = {}
    for kind, cfg in cfgs.items():
        ckpt_save.save(cfg, None, 1, 2, TransferOptions(transfer=1 << 20))
        for f in plan_checkpoint(cfg, 0, 1).files:
            paths[(kind, f.name)] = str(tmp_path / kind / "global_epoch1_step2" / f.name)
    loaded = torch_shapes(list(paths.values()))
    got = {k: loaded[p] for k, p in paths.items()}
    model, opt = transformer_states(2, 128, 384, 500, 4, 2, 1, "fp16", "fp32")
    want = {"model_0_model_states.pt": model, "zero_pp_rank_0_mp_rank_0_optim_states.pt": opt}
    for name, tree in want.items():
        # randomize_tensor: false: DLIO's torch.ones, read back as ones through torch
        assert got[("ones", name)]["state"] == as_torch(tree, True)
        # random bytes: the same keys, dtypes and shapes, and not ones
        random = got[("random", name)]["state"]
        assert strip(random) == strip(as_torch(tree, False))
        assert not any(v[2] for v in leaves(random))
    layer = {"0": ("int8", 16), "1": ("int8", 40)}
    groups = {"0": {"a": ("int8", 100), "b": ("int8", 100)}, "1": {"a": ("int8", 28), "b": ("int8", 28)}}
    assert got[("legacy", "model_states-0.pt")]["state"] == as_torch({"a": ("int8", 4096)}, True)
    layers = got[("legacy", "zero_pp_rank_0_mp_rank_0_model_states.pt")]
    assert layers["state"] == as_torch({"1": layer, "2": layer}, True)
    assert layers["shared"] == ["1", "2"]  # one dict object under both layers, as DLIO's
    optim = got[("legacy", "zero_pp_rank_0_mp_rank_0_optim_states.pt")]["state"]
    assert optim == as_torch({**groups, "combined": ("int8", 128)}, True)


# --------------------------------------------------------------------------------------------------
# byte for byte against torch.save


SAVE = """
    import json, sys, torch
    DT = {"int8": torch.int8, "fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}
    cases = json.load(open(sys.argv[1]))
    for i, (tree, dtype, shared) in enumerate(cases):
        one = {}
        # keys as DLIO makes them: str(index), a new object each time; "a", "b", "combined" are
        # literals in its code, one object (json shares equal keys: undo that)
        key = lambda k: str(int(k)) if k.isdigit() else sys.intern(k)
        def build(node):
            if isinstance(node, dict):
                if shared and node == shared:  # DLIO's legacy layers: one dict object everywhere
                    if "d" not in one:
                        one["d"] = {key(k): build(v) for k, v in node.items()}
                    return one["d"]
                return {key(k): build(v) for k, v in node.items()}
            return torch.zeros(node, dtype=DT[dtype])
        with open(f"{sys.argv[2]}/{i}.pt", "wb") as f:  # a file object, as DLIO saves
            torch.save(build(tree), f)
    big = {"0": 100, "1": (1 << 32) + 5, "2": 7, "3": 0, "4": 9}  # zip64: metadata only, sparse
    with torch.serialization.skip_data():
        with open(f"{sys.argv[2]}/big.pt", "wb") as f:
            torch.save({k: torch.empty(n, dtype=torch.int8) for k, n in big.items()}, f)
"""


def masked(b):
    """The file with the fields torch fills differently blanked: data records' CRC-32 and the
    serialization id (with its CRC).  Walks the central directory."""
    b = bytearray(b)
    loc = b.rfind(b"PK\x06\x07")
    z64 = struct.unpack_from("<Q", b, loc + 8)[0]
    n, _, cd = struct.unpack_from("<QQQ", b, z64 + 32)
    for _ in range(n):
        nl, el, cl = struct.unpack_from("<HHH", b, cd + 28)
        name = bytes(b[cd + 46 : cd + 46 + nl]).decode()
        size, hdr = struct.unpack_from("<I", b, cd + 24)[0], struct.unpack_from("<I", b, cd + 42)[0]
        lnl, lel = struct.unpack_from("<HH", b, hdr + 26)
        data = hdr + 30 + lnl + lel
        if "/data/" in name or name.endswith("serialization_id"):
            b[cd + 16 : cd + 20] = bytes(4)
            if size:
                b[data + size + 4 : data + size + 8] = bytes(4)
            if name.endswith("serialization_id"):
                b[data : data + size] = b"0" * size
        cd += 46 + nl + el + cl
    return bytes(b)


def ours(tree, dtype):
    tf = torchzip.container(torchzip.signature(tree), dtype)
    b = bytearray(tf.size)
    for off, seg in tf.segments:
        b[off : off + len(seg)] = seg
    return bytes(b)


@needs_dlio("2.0.0")
def test_bytes_equal_torch_save(tmp_path):
    shared = {"0": 5, "2": 300}
    cases = [
        ({"a": 10240}, "int8", None),
        ({"0": 1824000, "1": 1280, "2": 70000, "3": 3, "5": 0}, "fp32", None),  # BININT sizes, an empty tensor
        ({"0": {"a": 3, "b": 3}, "1": {"a": 7, "b": 7}, "combined": 10}, "int8", None),
        ({str(i): shared for i in range(1, 5)}, "int8", shared),
        ({str(i): {str(j): 100 + j for j in range(6)} for i in range(60)}, "bf16", None),  # memo past 255
        ({str(i): 1 for i in range(1000)}, "fp16", None),  # a full SETITEMS batch
        ({str(i): 2 for i in range(1001)}, "int8", None),
    ]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    run_py("2.0.0", SAVE, tmp_path / "cases.json", tmp_path)
    for i, (tree, dtype, sh) in enumerate(cases):
        if sh:  # the same dict object under every key
            tree = {k: sh for k in tree}
        theirs = (tmp_path / f"{i}.pt").read_bytes()
        assert masked(ours(tree, dtype)) == masked(theirs), f"case {i}"
    # zip64: every literal byte where torch put it (its skip_data file is sparse: seek, not read)
    tf = torchzip.container(torchzip.signature({"0": 100, "1": (1 << 32) + 5, "2": 7, "3": 0, "4": 9}), "int8")
    assert os.path.getsize(tmp_path / "big.pt") == tf.size
    with open(tmp_path / "big.pt", "rb") as f:
        for off, seg in tf.segments[:-1]:
            f.seek(off)
            assert f.read(len(seg)) == seg
        off, seg = tf.segments[-1]  # version, serialization id, central directory, end records
        f.seek(off)
        tail = f.read(len(seg))
    sid = seg.index(torchzip.SERIALIZATION_ID)
    differ = [i for i in range(len(seg)) if seg[i] != tail[i] and not sid <= i < sid + 40]
    assert len(differ) <= 8  # the id's CRC-32, in its descriptor and its central directory entry


# --------------------------------------------------------------------------------------------------
# sizes on disk against DLIO's own files


DLIO_RUNS = {
    "transformer": (
        [
            "++workload.model.num_layers=2",
            "++workload.model.transformer.vocab_size=1000",
            "++workload.model.transformer.hidden_size=256",
            "++workload.model.transformer.ffn_hidden_size=512",
            "++workload.model.transformer.num_attention_heads=4",
            "++workload.model.transformer.num_kv_heads=4",
        ],
        [
            "model.type=transformer",
            "model.num_layers=2",
            "model.transformer.vocab_size=1000",
            "model.transformer.hidden_size=256",
            "model.transformer.ffn_hidden_size=512",
            "model.transformer.num_attention_heads=4",
            "model.transformer.num_kv_heads=4",
            "model.parallelism.zero_stage=3",
            "model.model_datatype=fp16",
            "model.optimizer_datatype=fp32",
        ],
    ),
    "legacy": (
        [
            "++workload.model.type=default",
            "++workload.model.num_layers=2",
            "++workload.model.layer_parameters=[16,32]",
            "++workload.model.optimization_groups=[100,0,28]",
            "++workload.model.parallelism.zero_stage=0",
        ],
        [
            "model.type=default",
            "model.num_layers=2",
            "model.layer_parameters=[16,32]",
            "model.optimization_groups=[100,0,28]",
            "model.model_size=10240",  # DLIO's default model_size (it ignores the key)
            "model.parallelism.zero_stage=0",
        ],
    ),
}


@needs_dlio("current")
@pytest.mark.parametrize("case", sorted(DLIO_RUNS))
def test_sizes_on_disk_equal_dlio(tmp_path, case):
    dlio_args, our_sets = DLIO_RUNS[case]
    script = "import sys; from dlio_benchmark.main import main; sys.argv = ['dlio_benchmark', *sys.argv[1:]]; main()"
    run_py(
        "current",
        script,
        "workload=llama_7b_zero3",
        *dlio_args,
        f"++workload.checkpoint.checkpoint_folder={tmp_path / 'dlio'}",
        "++workload.checkpoint.num_checkpoints_write=1",
        "++workload.checkpoint.num_checkpoints_read=0",
        "++workload.checkpoint.time_between_checkpoints=0",
        f"++workload.output.folder={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    folder = tmp_path / "dlio" / "global_epoch1_step1"
    theirs = {n: os.path.getsize(folder / n) for n in os.listdir(folder)}
    cfg = load_config(sets=["framework=pytorch", "workflow.checkpoint=true", "workflow.train=false", *our_sets], env={})
    mine = {f.name: f.nbytes for f in plan_checkpoint(cfg, 0, 1).files}
    assert sorted(mine) == sorted(theirs)
    for n in theirs:  # the same container: equal, unless DLIO's torch lays it out differently
        assert abs(mine[n] - theirs[n]) <= 4096, (n, mine[n], theirs[n])
