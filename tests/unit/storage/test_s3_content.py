"""The bytes of a checkpoint's objects on S3 (dlio.storage.s3.content): every 4 KiB block stamped
with its object and offset, literals laid over them, a pattern the user asked for left alone."""

import numpy as np

from dlio.storage.s3 import content


def blocks(b: bytes):
    return [bytes(b[o : o + 4096]) for o in range(0, len(b) - len(b) % 4096, 4096)]


def test_pieces_of_objects_share_no_block():
    base = content.content(64 << 10, None)
    st = content.Stamper(base, stamped=True)
    seen = set()
    for uri in ("s3://b/a", "s3://b/c"):
        for off in (0, 64 << 10):
            got = blocks(st.piece(content.object_id(uri), off, 64 << 10, []))
            assert len(set(got)) == 16 and not set(got) & seen
            seen |= set(got)


def test_stamp_is_object_and_offset_and_the_rest_is_the_base():
    base = content.content(3 * 4096 + 5, None)  # a size that is no whole number of words
    st = content.Stamper(base, stamped=True)
    piece = bytes(st.piece(7, 8192, len(base), []))
    w = np.frombuffer(piece[: 3 * 4096], dtype=np.uint64).reshape(3, 512)
    assert list(w[:, 0]) == [7, 7, 7] and list(w[:, 1]) == [8192, 12288, 16384]
    for b in range(3):
        assert piece[b * 4096 + 16 : (b + 1) * 4096] == base[b * 4096 + 16 : (b + 1) * 4096]
    assert piece[3 * 4096 :] == base[3 * 4096 :]


def test_literals_go_over_the_stamps_and_come_out_again():
    base = content.content(16384, None)
    st = content.Stamper(base, stamped=True)
    lit = b"PK\x03\x04" + bytes(30)
    piece = bytes(st.piece(1, 4096, 8192, [(4096 + 4090, lit)]))  # a literal across a block's stamp
    assert piece[4090 : 4090 + len(lit)] == lit
    after = bytes(st.piece(1, 4096, 8192, []))
    assert after[4096 + 16 : 4096 + 100] == base[4096 + 16 : 4096 + 100]  # the literal is gone


def test_a_pattern_is_left_as_asked():
    base = content.content(8192, 0x3F803F803F803F80)  # bf16 ones
    st = content.Stamper(base, stamped=False)
    assert bytes(st.piece(5, 0, 8192, [])) == base
