"""Each format's files are real files of that format, read back with the format's own library
(numpy, h5py, Pillow, csv) or an independent hand-written reader (TFRecord framing, protobuf wire
format, CRC32C), with DLIO's shapes, names and layouts."""

import csv
import inspect
import io
import os
import struct
import zipfile
import zlib

import numpy as np
import pytest

from dlio.base.errors import ConfigError
from dlio.dataset import formats as fmts
from dlio.dataset.formats import FORMATS, get_format
from dlio.dataset.generate import generate
from dlio.dataset.manifest import load_manifest
from dlio.dataset.spec import DatasetSpec, file_dims, file_paths

_core = pytest.importorskip("dlio._core")


# ---------------------------------------------------------------------------------------------
# independent helpers


def _crc32c_table():
    tab = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tab.append(c)
    return tab


_TAB = _crc32c_table()


def crc32c_py(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _TAB[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_varint(b, pos):
    shift = val = 0
    while True:
        x = b[pos]
        pos += 1
        val |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return val, pos


def parse_fields(b):
    """Generic protobuf wire-format parser: list of (field, wiretype, value)."""
    out, pos = [], 0
    while pos < len(b):
        tag, pos = read_varint(b, pos)
        f, wt = tag >> 3, tag & 7
        if wt == 0:
            v, pos = read_varint(b, pos)
        elif wt == 2:
            n, pos = read_varint(b, pos)
            v = b[pos : pos + n]
            pos += n
        else:
            raise AssertionError(f"unexpected wire type {wt}")
        out.append((f, wt, v))
    assert pos == len(b)
    return out


def decode_example(b):
    """tf.train.Example -> {key: ('bytes', [..]) | ('int64', [..])}."""
    ((f, wt, features),) = parse_fields(b)
    assert (f, wt) == (1, 2)
    out = {}
    for f, wt, entry in parse_fields(features):
        assert (f, wt) == (1, 2)
        kv = dict((ff, v) for ff, _, v in parse_fields(entry))
        key = kv[1].decode()
        ((kind, _, lst),) = parse_fields(kv[2])
        if kind == 1:
            out[key] = ("bytes", [v for _, _, v in parse_fields(lst)])
        elif kind == 3:
            ((ff, wt2, packed),) = parse_fields(lst)
            vals, p = [], 0
            while p < len(packed):
                v, p = read_varint(packed, p)
                vals.append(v)
            out[key] = ("int64", vals)
    return out


def read_tfrecords(path):
    """Walk a TFRecord file checking every length and masked CRC32C; (offset, length, data) each."""
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        (lcrc,) = struct.unpack_from("<I", data, pos + 8)
        assert lcrc == masked(crc32c_py(data[pos : pos + 8]))
        payload = data[pos + 12 : pos + 12 + n]
        assert len(payload) == n
        (dcrc,) = struct.unpack_from("<I", data, pos + 12 + n)
        assert dcrc == masked(crc32c_py(payload))
        out.append((pos, n + 16, payload))
        pos += n + 16
    assert pos == len(data)
    return out


def expected_dims(ntrain, neval, L, stdev):
    """DLIO's draw, computed independently: seed(10), 2*total normals, int, >= 1."""
    total = ntrain + neval
    D = int(np.sqrt(L))
    if stdev > 0:
        np.random.seed(10)
        d = [max(int(x), 1) for x in np.random.normal(D, stdev / 2 / np.sqrt(L), 2 * total)]
        np.random.seed()
    else:
        d = [D] * (2 * total)
    return [(d[2 * i], d[2 * i + 1]) for i in range(total)]


def make(tmp_path, fmt, spf=3, **kw):
    kw.setdefault("record_length_bytes", 1024)
    kw.setdefault("record_length_bytes_stdev", 256)
    spec = DatasetSpec(
        data_folder=str(tmp_path / fmt), format=fmt, num_files_train=4, num_files_eval=2, num_samples_per_file=spf, **kw
    )
    res = generate(spec, threads=2)
    assert res.files_written == 6 and res.files_skipped == 0
    return spec


def all_files(spec):
    dims = (
        expected_dims(
            spec.num_files_train, spec.num_files_eval, spec.record_length_bytes, spec.record_length_bytes_stdev
        )
        if not spec.record_dims
        else None
    )
    paths = file_paths(spec, "train") + file_paths(spec, "valid")
    if dims is None:
        dims = [tuple(spec.record_dims)] * len(paths)
    return list(zip(paths, dims))


# ---------------------------------------------------------------------------------------------


def test_registry():
    assert set(FORMATS) == {
        "npz",
        "npy",
        "hdf5",
        "tfrecord",
        "jpeg",
        "png",
        "csv",
        "indexed_binary",
        "mmap_indexed_binary",
        "synthetic",
        "parquet",
    }
    for f in FORMATS:
        assert get_format(f).EXT == f
    assert get_format("npz").WHOLE_FILE and get_format("jpeg").WHOLE_FILE and get_format("csv").WHOLE_FILE
    assert not get_format("hdf5").WHOLE_FILE and not get_format("tfrecord").WHOLE_FILE
    assert get_format("mmap_indexed_binary").module is get_format("indexed_binary").module
    # every format answers what the module docstring lists (parquet had no expected_size)
    assert get_format("parquet").expected_size((4, 4), 2, DatasetSpec(format="parquet")) is None
    with pytest.raises(ConfigError, match="hdf5_opt"):
        get_format("hdf5_opt")


def test_every_format_module_has_the_functions_format_types():
    """Each format module's functions take the parameters Format's protocols name (mypy sees the module
    only through Format, so a module that lacks one or names a parameter otherwise fails here)."""
    protocols = {
        "program": fmts.ProgramFn,
        "programs": fmts.ProgramsFn,
        "write": fmts.WriteFn,
        "layout_extents": fmts.LayoutFn,
        "expected_size": fmts.ExpectedSizeFn,
        "estimate_sizes": fmts.EstimateSizesFn,
        "companions": fmts.CompanionsFn,
        "valid": fmts.ValidFn,
        "extents": fmts.ExtentsFn,
    }
    optional = {"program", "programs", "write", "layout_extents"}
    for name in FORMATS:
        module = get_format(name).module
        assert hasattr(module, "program") or hasattr(module, "write"), name
        for fn, protocol in protocols.items():
            if fn in optional and not hasattr(module, fn):
                continue
            want = [p for p in inspect.signature(protocol.__call__).parameters if p != "self"]
            assert list(inspect.signature(getattr(module, fn)).parameters) == want, (name, fn)


def test_crc32c_core_matches_reference():
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert _core.crc32c(data) == crc32c_py(data)
    assert crc32c_py(b"123456789") == 0xE3069283


@pytest.mark.parametrize("spf", [1, 3])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_npz(tmp_path, spf, dtype):
    spec = make(tmp_path, "npz", spf, record_element_type=dtype)
    contents = set()
    for path, dims in all_files(spec):
        with np.load(path) as z:
            assert sorted(z.files) == ["x", "y"]
            x, y = z["x"], z["y"]
        assert x.shape == (*dims, spf) and x.dtype == np.dtype(dtype)
        assert y.dtype == np.int64 and y.shape == (spf,) and not y.any()
        contents.add(x.tobytes()[:64])
        # byte-for-byte the same layout numpy's own writer makes (zip64 local headers etc.)
        ref = io.BytesIO()
        np.savez(ref, x=np.zeros((*dims, spf), dtype), y=[0] * spf)
        assert os.path.getsize(path) == len(ref.getvalue())
        with zipfile.ZipFile(path) as zf:
            assert [i.compress_type for i in zf.infolist()] == [zipfile.ZIP_STORED] * 2
        raw = open(path, "rb").read(64)
        assert raw[:4] == b"PK\x03\x04" and struct.unpack_from("<II", raw, 18) == (0xFFFFFFFF, 0xFFFFFFFF)
        assert struct.unpack_from("<H", raw, 28)[0] == 20  # the zip64 extra field numpy forces
    assert len(contents) == 6  # random content differs per file


@pytest.mark.parametrize("spf", [1, 3])
def test_npy(tmp_path, spf):
    spec = make(tmp_path, "npy", spf, record_element_type="int16")
    for path, dims in all_files(spec):
        a = np.load(path)
        assert a.shape == (*dims, spf) and a.dtype == np.int16
        ref = io.BytesIO()
        np.save(ref, np.zeros((*dims, spf), np.int16))
        ref = ref.getvalue()
        head = open(path, "rb").read(128)
        assert head == ref[:128] and os.path.getsize(path) == len(ref)
        assert a.any()


def _h5_check(spec, k=1):
    import h5py

    for path, dims in all_files(spec):
        spf = spec.num_samples_per_file
        ex = get_format("hdf5").extents(path, spf, spec)
        raw = open(path, "rb").read()
        with h5py.File(path, "r") as hf:
            assert sorted(hf.keys()) == sorted([f"records_{i}" for i in range(k)] + ["labels"])
            lab = hf["labels"][:]
            assert lab.dtype == np.int64 and lab.shape == (spf,) and not lab.any()
            for i in range(k):
                ds = hf[f"records_{i}"]
                if spec.record_dims:
                    d = [spec.record_dims[0] // k, *spec.record_dims[1:]]
                    shape = (spf, *(d[1:] if d[0] == 1 else d))
                else:
                    shape = (spf, dims[0], dims[1])
                assert ds.shape == shape and ds.dtype == np.dtype(spec.record_element_type)
            yield hf, path, ex, raw


@pytest.mark.parametrize("spf", [1, 3])
def test_hdf5_contiguous_extents_point_at_samples(tmp_path, spf):
    spec = make(tmp_path, "hdf5", spf, record_element_type="float32")
    for hf, path, (s, o, ln), raw in _h5_check(spec):
        ds = hf["records_0"]
        assert ds.chunks is None
        assert s.tolist() == list(range(spf))
        for j in range(spf):
            want = ds[j].tobytes()
            assert ln[j] == len(want) and raw[o[j] : o[j] + ln[j]] == want


def test_hdf5_multi_dataset_record_dims(tmp_path):
    spec = make(tmp_path, "hdf5", 3, record_length_bytes_stdev=0, record_dims=(4, 8, 6), hdf5_num_dset_per_record=2)
    for hf, path, (s, o, ln), raw in _h5_check(spec, k=2):
        assert hf["records_0"].shape == (3, 2, 8, 6)
        assert s.tolist() == [0, 0, 1, 1, 2, 2]
        for r in range(6):
            j, ds = s[r], hf[f"records_{r % 2}"]
            assert raw[o[r] : o[r] + ln[r]] == ds[j].tobytes()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_hdf5_chunked_extents_are_the_chunks(tmp_path, compression):
    spec = make(
        tmp_path,
        "hdf5",
        5,
        record_length_bytes=400,
        record_length_bytes_stdev=0,
        hdf5_chunk_dims=(2, 20, 20),
        compression=compression,
        compression_level=4,
    )
    for hf, path, (s, o, ln), raw in _h5_check(spec):
        ds = hf["records_0"]
        assert ds.chunks == (2, 20, 20)
        if compression == "gzip":
            assert ds.compression == "gzip"
        assert s.tolist() == [0, 1, 2, 3, 4]  # one chunk per sample here, chunk rows 0,0,1,1,2
        for r in range(5):
            j = s[r]
            rows = ds[(j // 2) * 2 : (j // 2) * 2 + 2]
            chunk = raw[o[r] : o[r] + ln[r]]
            if compression == "gzip":
                chunk = zlib.decompress(chunk)
            assert chunk[: rows.nbytes] == rows.tobytes()
        assert o[0] == o[1] and o[2] == o[3] and o[0] != o[2]


@pytest.mark.parametrize("spf", [1, 3])
def test_tfrecord_framing_crc_proto_and_index(tmp_path, spf):
    spec = make(tmp_path, "tfrecord", spf)
    fmt = get_format("tfrecord")
    for path, dims in all_files(spec):
        recs = read_tfrecords(path)
        assert len(recs) == spf
        nbytes = dims[0] * dims[1]
        for off, length, payload in recs:
            ex = decode_example(payload)
            assert ex["size"] == ("int64", [nbytes])
            kind, imgs = ex["image"]
            assert kind == "bytes" and len(imgs) == 1 and len(imgs[0]) == nbytes
        split = "valid" if "/valid/" in path else "train"
        idx = os.path.join(spec.data_folder, "index", split, os.path.basename(path) + ".idx")
        lines = open(idx).read().splitlines()
        assert lines == [f"{off} {length}" for off, length, _ in recs]
        s, o, ln = fmt.extents(path, spf, spec)
        assert s.tolist() == list(range(spf))
        assert o.tolist() == [r[0] for r in recs] and ln.tolist() == [r[1] for r in recs]
        assert len({r[2] for r in recs}) == spf  # every record has its own content


def test_tfrecord_matches_protobuf_runtime():
    pytest.importorskip("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="dlio_ex.proto", package="tfx", syntax="proto3")

    def msg(name):
        m = fdp.message_type.add()
        m.name = name
        return m

    msg("BytesList").field.add(name="value", number=1, type=F.TYPE_BYTES, label=F.LABEL_REPEATED)
    msg("Int64List").field.add(name="value", number=1, type=F.TYPE_INT64, label=F.LABEL_REPEATED)
    feat = msg("Feature")
    feat.oneof_decl.add(name="kind")
    feat.field.add(
        name="bytes_list",
        number=1,
        type=F.TYPE_MESSAGE,
        type_name=".tfx.BytesList",
        label=F.LABEL_OPTIONAL,
        oneof_index=0,
    )
    feat.field.add(
        name="int64_list",
        number=3,
        type=F.TYPE_MESSAGE,
        type_name=".tfx.Int64List",
        label=F.LABEL_OPTIONAL,
        oneof_index=0,
    )
    fs = msg("Features")
    e = fs.nested_type.add(name="FeatureEntry")
    e.options.map_entry = True
    e.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    e.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".tfx.Feature", label=F.LABEL_OPTIONAL)
    fs.field.add(
        name="feature", number=1, type=F.TYPE_MESSAGE, type_name=".tfx.Features.FeatureEntry", label=F.LABEL_REPEATED
    )
    msg("Example").field.add(
        name="features", number=1, type=F.TYPE_MESSAGE, type_name=".tfx.Features", label=F.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    Example = message_factory.GetMessageClass(pool.FindMessageTypeByName("tfx.Example"))
    from dlio.dataset.formats.tfrecord import example_parts

    for n in (0, 127, 128, 16384, 114244):
        img = bytes(range(256)) * (n // 256) + bytes(n % 256)
        p, s = example_parts(n)
        m = Example()
        m.features.feature["image"].bytes_list.value.append(img)
        m.features.feature["size"].int64_list.value.append(n)
        assert m.SerializeToString(deterministic=True) == p + img + s


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_images_decode_and_have_the_record_size(tmp_path, fmt):
    from PIL import Image

    spec = make(tmp_path, fmt, 1, record_length_bytes=150528, record_length_bytes_stdev=20000)
    sizes = []
    for path, dims in all_files(spec):
        assert os.path.getsize(path) == dims[0] * dims[1]  # exactly the drawn record size
        sizes.append(os.path.getsize(path))
        with Image.open(path) as im:
            assert im.format == fmt.upper() and im.mode == "L"
            im.load()
            a = np.asarray(im)
        assert a.ndim == 2 and a.size > 0.5 * dims[0] * dims[1] / 2  # mostly image, little padding
        assert a.std() > 30  # noise, really decoded
    assert len(set(sizes)) == 6
    data = [open(p, "rb").read() for p, _ in all_files(spec)]
    assert len({d[:4096] for d in data}) == 6  # unique files (random padding)


@pytest.mark.parametrize("side", [1, 7, 8, 9, 100, 333])
def test_png_written_without_pillow_decodes_with_it_to_the_stripes(side):
    from PIL import Image

    from dlio.dataset.formats import image

    data = image.base_image("PNG", side, side)
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        a = np.asarray(im)
    stripes = np.zeros((side, side), np.uint8)
    stripes[:, (np.arange(side) // 8) % 2 == 1] = 255
    assert im.mode == "L" and (a == stripes).all()
    assert data[12:16] == b"IHDR" and len(data) > image.SPLIT["PNG"] and data.endswith(image.PNG_END)


def test_png_generation_does_not_load_pillow(tmp_path):
    # loading Pillow takes ~30 ms, a sizeable part of a short PNG generation (bench/generate_vs_fio.py)
    import subprocess
    import sys

    code = (
        "import sys; from dlio.dataset.generate import generate; from dlio.dataset.spec import DatasetSpec; "
        f"generate(DatasetSpec(data_folder={str(tmp_path)!r}, format='png', num_files_train=4, "
        "record_length_bytes=20000)); print('PIL' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-1] == "False"
    assert len(list(tmp_path.rglob("*.png"))) == 4


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_images_small_and_odd_targets(tmp_path, fmt):
    from PIL import Image

    spec = make(tmp_path, fmt, 1, record_length_bytes=3000, record_length_bytes_stdev=900)
    for path, dims in all_files(spec):
        assert os.path.getsize(path) == dims[0] * dims[1]
        with Image.open(path) as im:
            im.load()


@pytest.mark.parametrize("spf", [1, 3])
def test_csv(tmp_path, spf):
    spec = make(tmp_path, "csv", spf)
    for path, dims in all_files(spec):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        assert len(rows) == spf
        vals = [[int(v) for v in r] for r in rows]
        assert all(len(r) == dims[0] * dims[1] for r in vals)
        assert all(r == vals[0] for r in vals)  # DLIO writes identical rows
        flat = np.array(vals[0])
        assert flat.min() >= 0 and flat.max() <= 255 and flat.std() > 30
        a = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
        assert a.shape == (spf, dims[0] * dims[1])


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64"])
def test_csv_integer_rows_are_pythons_text(tmp_path, dtype):
    """Rows of every integer width come from C (dc_csv_row) yet hold exactly what Python's
    ",".join(map(str, values)) gives for the record's values (DLIO's pandas writes the same text)."""
    from dlio.dataset.formats import csv as csv_fmt
    from dlio.dataset.formats import mix_seed, record_elems

    spec = make(tmp_path, "csv", 2, record_element_type=dtype, record_length_bytes_stdev=0)
    for k, (path, dims) in enumerate(all_files(spec)):
        values = csv_fmt.record_values(record_elems(dims), dtype, mix_seed(mix_seed(spec.seed_content, k), 0))
        row = (",".join(map(str, values.tolist())) + "\n").encode()
        assert values.min() < 0 if dtype.startswith("int") else True
        with open(path, "rb") as f:
            assert f.read() == row * 2


def test_csv_float(tmp_path):
    spec = make(tmp_path, "csv", 2, record_element_type="float32", record_length_bytes_stdev=0)
    for path, dims in all_files(spec):
        a = np.loadtxt(path, delimiter=",", ndmin=2)
        assert a.shape == (2, dims[0] * dims[1]) and 0 <= a.min() and a.max() < 1


@pytest.mark.parametrize("fmt", ["indexed_binary", "mmap_indexed_binary"])
def test_indexed_binary(tmp_path, fmt):
    spec = make(tmp_path, fmt, 3, record_element_type="uint16")
    for path, dims in all_files(spec):
        assert path.endswith("." + fmt)
        ss = dims[0] * dims[1] * 2
        off = np.fromfile(path + ".off.idx", dtype="<u8")
        sz = np.fromfile(path + ".sz.idx", dtype="<u8")
        assert off.tolist() == [0, ss, 2 * ss] and sz.tolist() == [ss] * 3
        assert os.path.getsize(path) == 3 * ss
        s, o, ln = get_format(fmt).extents(path, 3, spec)
        assert s.tolist() == [0, 1, 2] and o.tolist() == off.tolist() and ln.tolist() == sz.tolist()
        data = open(path, "rb").read()
        assert len({data[a : a + 64] for a in off.tolist()}) == 3


def test_synthetic(tmp_path):
    spec = make(tmp_path, "synthetic", 2)
    for i, (path, _) in enumerate(all_files(spec)):
        assert open(path).read() == str(i)
    m = load_manifest(spec, "train")
    assert m.table.flat(m.nfiles)[0].size == 0 and m.file_size.tolist() == [1, 1, 1, 1]


def test_generated_dims_follow_file_dims(tmp_path):
    spec = make(tmp_path, "npy", 1, record_length_bytes=2500, record_length_bytes_stdev=900)
    dims = np.concatenate([file_dims(spec, "train"), file_dims(spec, "valid")])
    for (path, exp), d in zip(all_files(spec), dims.tolist()):
        assert tuple(d) == exp and np.load(path, mmap_mode="r").shape == (*exp, 1)
