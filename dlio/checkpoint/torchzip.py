"""torch.save's file format, written without torch: the zip container ``torch.load`` opens.

DLIO saves each state with ``torch.save(state, f)`` into an open file: a ZIP_STORED archive whose
records are all named ``archive/...`` (torch's name for a buffer): ``data.pkl`` (the state, pickle
protocol 2, each tensor a ``_rebuild_tensor_v2`` of a persistent storage id ``('storage',
torch.<Dtype>Storage, key, 'cpu', numel)``), ``.format_version``, ``.storage_alignment``,
``byteorder``, one ``data/<key>`` per storage (its raw bytes, keys ``0, 1, ...`` in pickling order),
``version`` and ``.data/serialization_id``; then the central directory and, always, the zip64 end
records.  Every record's bytes start on a 64-byte boundary (torch pads with a ``FB`` extra field)
and each is followed by a data descriptor.  This module reproduces torch 2.13's bytes (checked
against it by tests/unit/checkpoint/test_torchzip.py), except two fields:

* the CRC-32 of each ``data/<key>`` record is 0, as ``torch.serialization.set_crc32_options(False)``
  (and torch's ``skip_data``) write it: ``torch.load`` does not check it, and computing it would put
  a pass over every tensor byte into the timed save; the small records carry their real CRC;
* ``serialization_id`` (random per save in torch) is a fixed 40-digit number.

The container is planned once per distinct file shape (``container``, cached): the literal byte
ranges (headers, pickle, descriptors, central directory) and where each storage's bytes go.  The
C core writes the whole file in its usual sequential requests and copies the literal ranges into
the requests that cover them (``Run(file_overlay=...)``), so a save stays one sequential write.

A state is a nested dict of str keys whose leaves are tensor element counts (ints); the same dict
object may appear more than once (DLIO's legacy ``layer_parameters`` shares one dict between all
layers): pickle then refers back to it and its tensors are stored once, as torch does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Tuple, Union

PREFIX = "archive"  # torch's record prefix when it saves to a file object (DLIO: open(name, "wb"))
ALIGN = 64  # torch.utils.serialization.config.save.storage_alignment
STORAGE_CLASS = {
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "fp16": "HalfStorage",
    "bf16": "BFloat16Storage",
    "fp32": "FloatStorage",
    "fp64": "DoubleStorage",
}
ITEMSIZE = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
SERIALIZATION_ID = b"0278281592713641928307430128936127745310"  # any 40 digits; torch draws them
_U32 = 0xFFFFFFFF  # a size or offset at least this large goes into a zip64 extra field
_BATCH = 1000  # the C pickler writes dict items in batches of this many (MARK ... SETITEMS)

Tree = Dict[str, Any]  # str -> int (a tensor's element count) or a nested Tree
Sig = Tuple  # hashable form of a Tree: see signature()


@dataclass(frozen=True)
class TorchFile:
    """One torch.save file of a given shape: its size and every byte that is not tensor data."""

    size: int  # bytes on disk
    segments: Tuple[Tuple[int, bytes], ...]  # (file offset, literal bytes), sorted, not overlapping
    storages: Tuple[Tuple[int, int], ...]  # (file offset, bytes) of data/0, data/1, ...
    tensor_bytes: int  # sum of the storages

    @property
    def overhead(self) -> int:
        return self.size - self.tensor_bytes


def signature(tree: Tree) -> Sig:
    """The tree as nested tuples, hashable: a dict is ``("d", ((key, value), ...))`` the first time
    it is met (depth first, insertion order, as pickle walks it) and ``("r", n)`` (the n-th dict met)
    after; a tensor is its element count."""
    seen: Dict[int, int] = {}

    def walk(node: Union[int, Tree]) -> Any:
        if isinstance(node, dict):
            if id(node) in seen:
                return ("r", seen[id(node)])
            seen[id(node)] = len(seen)
            return ("d", tuple((str(k), walk(v)) for k, v in node.items()))
        n = int(node)
        if n < 0:
            raise ValueError(f"tensor of {n} elements")
        return n

    if not isinstance(tree, dict):
        raise TypeError("a torch.save state is a dict")
    return walk(tree)


def tensor_numels(sig: Sig) -> List[int]:
    """Element counts of the distinct tensors of a signature, in storage-key order."""
    out: List[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, tuple):
            if node[0] == "d":
                for _, v in node[1]:
                    walk(v)
            return
        out.append(node)

    walk(sig)
    return out


# --------------------------------------------------------------------------------------------------
# data.pkl: what CPython's C pickler writes for torch's persistent_id and Tensor.__reduce_ex__


class _Pickle:
    def __init__(self, dtype: str):
        self.out = bytearray(b"\x80\x02")  # PROTO 2
        self.memo = 0
        self.once: Dict[str, int] = {}  # objects torch shares between tensors -> memo index
        self.dicts: List[int] = []  # memo index of the n-th dict
        self.storage_global = f"ctorch\n{STORAGE_CLASS[dtype]}\n".encode()
        self.nstorages = 0

    def put(self) -> int:
        i = self.memo
        self.memo += 1
        self.out += (b"q" + bytes([i])) if i < 256 else (b"r" + struct.pack("<I", i))
        return i

    def get(self, i: int) -> None:
        self.out += (b"h" + bytes([i])) if i < 256 else (b"j" + struct.pack("<I", i))

    def shared(self, name: str, literal: bytes) -> None:
        """An object torch passes for every tensor (a global, 'storage', 'cpu'): written once, then
        fetched from the memo."""
        if name in self.once:
            self.get(self.once[name])
        else:
            self.out += literal
            self.once[name] = self.put()

    def int_(self, n: int) -> None:
        if n <= 0xFF:
            self.out += b"K" + bytes([n])
        elif n <= 0xFFFF:
            self.out += b"M" + struct.pack("<H", n)
        elif n <= 0x7FFFFFFF:
            self.out += b"J" + struct.pack("<i", n)
        else:  # LONG1: little-endian two's complement in bit_length // 8 + 1 bytes
            b = n.to_bytes(n.bit_length() // 8 + 1, "little", signed=True)
            self.out += b"\x8a" + bytes([len(b)]) + b

    def str_(self, s: str) -> None:
        b = s.encode()
        self.out += b"X" + struct.pack("<I", len(b)) + b
        self.put()

    def key(self, k: str) -> None:
        """A dict key: DLIO's numeric keys are made by str(int), a new object each time; its other
        keys ('a', 'b', 'combined') are literals in its code, one object, so pickled once."""
        if k.isdigit():
            self.str_(k)
        else:
            b = k.encode()
            self.shared("key " + k, b"X" + struct.pack("<I", len(b)) + b)

    def tensor(self, numel: int) -> None:
        """torch._utils._rebuild_tensor_v2(storage, 0, (numel,), (1,), False, OrderedDict())."""
        self.shared("rebuild", b"ctorch._utils\n_rebuild_tensor_v2\n")
        self.out += b"(("  # MARK args, MARK persistent id
        self.shared("storage", b"X\x07\x00\x00\x00storage")
        self.shared("class", self.storage_global)
        self.str_(str(self.nstorages))
        self.nstorages += 1
        self.shared("cpu", b"X\x03\x00\x00\x00cpu")
        self.int_(numel)
        self.out += b"t"
        self.put()
        self.out += b"QK\x00"  # BINPERSID, storage offset 0
        self.int_(numel)
        self.out += b"\x85"  # size (numel,)
        self.put()
        self.out += b"K\x01\x85"  # stride (1,)
        self.put()
        self.out += b"\x89"  # requires_grad False
        self.shared("odict", b"ccollections\nOrderedDict\n")
        self.out += b")R"
        self.put()
        self.out += b"t"
        self.put()
        self.out += b"R"
        self.put()

    def node(self, node: Any) -> None:
        if not isinstance(node, tuple):
            self.tensor(node)
        elif node[0] == "r":
            self.get(self.dicts[node[1]])
        else:
            self.out += b"}"
            self.dicts.append(self.put())
            items = node[1]
            if len(items) == 1:
                self.key(items[0][0])
                self.node(items[0][1])
                self.out += b"s"
            elif items:
                i = 0
                while True:  # the C pickler's loop: a full last batch is followed by an empty one
                    batch = items[i : i + _BATCH]
                    self.out += b"("
                    for k, v in batch:
                        self.key(k)
                        self.node(v)
                    self.out += b"u"
                    i += len(batch)
                    if len(batch) < _BATCH:
                        break


def pickle_state(sig: Sig, dtype: str) -> bytes:
    """data.pkl of a state signature whose tensors all have ``dtype``."""
    p = _Pickle(dtype)
    p.node(sig)
    p.out += b"."
    return bytes(p.out)


# --------------------------------------------------------------------------------------------------
# the zip records, as torch's writer (miniz with data descriptors, 64-byte aligned data) lays them


def _zip64_extra(size: int, offset: int, local: bool) -> bytes:
    """Sizes (uncompressed, compressed) if the size needs 64 bits, then the header offset if it does;
    in a local header the compressed size is 0, as miniz writes it there (the descriptor has it)."""
    sizes = struct.pack("<QQ", size, 0 if local else size)
    fields = (sizes if size >= _U32 else b"") + (struct.pack("<Q", offset) if offset >= _U32 else b"")
    return struct.pack("<HH", 1, len(fields)) + fields if fields else b""


def _flags(size: int) -> int:
    """UTF-8 names (bit 11); sizes and CRC in a data descriptor after the data (bit 3), except for
    an empty record, which miniz writes without one."""
    return 0x0808 if size else 0x0800


def _local_header(offset: int, name: bytes, size: int) -> bytes:
    extra = _zip64_extra(size, offset, True)
    pad = -(offset + 30 + len(name) + len(extra) + 4) % ALIGN
    extra += b"FB" + struct.pack("<H", pad) + b"Z" * pad
    head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, _flags(size), 0, 0, 0, 0, 0, 0, len(name), len(extra))
    return head + name + extra


def _descriptor(offset: int, size: int, crc: int) -> bytes:
    if not size:
        return b""
    if size >= _U32 or offset >= _U32:
        return struct.pack("<IIQQ", 0x08074B50, crc, size, size)
    return struct.pack("<IIII", 0x08074B50, crc, size, size)


def _central(offset: int, name: bytes, size: int, crc: int) -> bytes:
    extra = _zip64_extra(size, offset, False)
    s32 = _U32 if size >= _U32 else size
    o32 = _U32 if offset >= _U32 else offset
    head = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        0,
        0,
        _flags(size),
        0,
        0,
        0,
        crc,
        s32,
        s32,
        len(name),
        len(extra),
        0,
        0,
        0,
        0,
        o32,
    )
    return head + name + extra


def _end(cd_offset: int, cd_size: int, n: int) -> bytes:
    eocd64 = cd_offset + cd_size
    return (
        struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, n, n, cd_size, cd_offset)
        + struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1)
        + struct.pack(
            "<IHHHHIIH",
            0x06054B50,
            0,
            0,
            min(n, 0xFFFF),
            min(n, 0xFFFF),
            min(cd_size, _U32),
            _U32 if cd_offset >= _U32 else cd_offset,
            0,
        )
    )


@lru_cache(maxsize=256)
def container(sig: Sig, dtype: str) -> TorchFile:
    """The torch.save file of a state signature (``signature(tree)``) with ``dtype`` tensors."""
    if dtype not in STORAGE_CLASS:
        raise ValueError(f"no torch storage for dtype {dtype!r}")
    isz = ITEMSIZE[dtype]
    pkl = pickle_state(sig, dtype)
    small = [
        ("data.pkl", pkl),
        (".format_version", b"1"),
        (".storage_alignment", str(ALIGN).encode()),
        ("byteorder", b"little"),
    ]
    tail = [("version", b"3\n"), (".data/serialization_id", SERIALIZATION_ID)]
    records: List[Tuple[str, Union[bytes, int], int]] = [(n, b, zlib.crc32(b)) for n, b in small]
    records += [(f"data/{k}", n * isz, 0) for k, n in enumerate(tensor_numels(sig))]
    records += [(n, b, zlib.crc32(b)) for n, b in tail]

    segments: List[Tuple[int, bytes]] = []
    storages: List[Tuple[int, int]] = []
    central: List[bytes] = []
    pending = bytearray()  # literal bytes not yet closed by a storage
    start = 0  # file offset of pending
    at = 0
    for name, body, crc in records:
        full = f"{PREFIX}/{name}".encode()
        size = body if isinstance(body, int) else len(body)
        head = _local_header(at, full, size)
        central.append(_central(at, full, size, crc))
        pending += head
        data_at = at + len(head)
        if isinstance(body, int):
            if size:
                segments.append((start, bytes(pending)))
                pending = bytearray()
                start = data_at + size
            storages.append((data_at, size))
        else:
            pending += body
        desc = _descriptor(at, size, crc)
        pending += desc
        at = data_at + size + len(desc)
    cd = b"".join(central)
    pending += cd + _end(at, len(cd), len(records))
    segments.append((start, bytes(pending)))
    size = start + len(pending)
    return TorchFile(
        size=size, segments=tuple(segments), storages=tuple(storages), tensor_bytes=sum(n for _, n in storages)
    )
