# Included by _core.pyx: dataset generation from segment programs (src/dlio_core/gen.c).

# A program's segments as numpy records, in dc_gen_seg's layout.
GEN_SEG_DTYPE = np.dtype([("kind", "<u4"), ("arg", "<u4"), ("a", "<u8"), ("b", "<u8")])


def _gen_segs(segs):
    a = np.ascontiguousarray(segs, dtype=GEN_SEG_DTYPE)
    if a.ndim != 1:
        raise ValueError("a program is a 1-d array of GEN_SEG_DTYPE")
    return a


def gen_size(segs):
    """Bytes a program writes."""
    cdef cnp.ndarray a = _gen_segs(segs)
    return dc_gen_size(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0])


def gen_render(segs, blob, uint64_t seed):
    """The bytes a program writes for a file of this seed (what gen_files writes), as bytes."""
    cdef cnp.ndarray a = _gen_segs(segs)
    cdef const unsigned char[::1] bl = np.frombuffer(bytes(blob) or b"\0", np.uint8)
    cdef uint64_t n = dc_gen_size(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0])
    cdef cnp.ndarray out = np.empty(n, np.uint8)
    cdef int rc
    with nogil:
        rc = dc_gen_render(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0], &bl[0], seed,
                           <unsigned char *>cnp.PyArray_DATA(out), n)
    _check(rc, "render")
    return out.tobytes()


def gen_files(tmps, finals, seeds, first, counts, segs, blob, bint fsync=False, stop=None, counters=None,
              bint direct=False):
    """Write files (each created unnamed and linked as finals[i] once complete; where the filesystem
    has no unnamed files, written as tmps[i] and renamed; tmps may be one suffix: the temporary name
    is then "." + the final name + suffix, beside it) from the programs
    segs[first[i]:first[i]+counts[i]] and seeds[i], in order, with the GIL released (direct: O_DIRECT,
    whole aligned blocks, each file's last partial block through the page cache).
    stop: int32 array of 1 (non-zero stops between files); counters: uint64 array [bytes, files]
    advanced after each file (read by another thread for progress). Raises OSError naming the file."""
    cdef Py_ssize_t n = len(finals), i
    cdef cnp.ndarray a = _gen_segs(segs)
    cdef cnp.ndarray sd = np.ascontiguousarray(seeds, dtype=np.uint64)
    cdef cnp.ndarray fi = np.ascontiguousarray(first, dtype=np.uint64)
    cdef cnp.ndarray ct = np.ascontiguousarray(counts, dtype=np.uint64)
    suffix = os.fsencode(tmps) if isinstance(tmps, str) else None
    if (suffix is None and len(tmps) != n) or sd.shape[0] != n or fi.shape[0] != n or ct.shape[0] != n:
        raise ValueError("gen_files: one tmp, final, seed, first and count per file")
    if n and int((fi + ct).max()) > a.shape[0]:
        raise ValueError("gen_files: a program runs past the segments")
    bl = np.frombuffer(bytes(blob) or b"\0", np.uint8)
    cdef const unsigned char[::1] blv = bl
    cdef cnp.ndarray st = np.zeros(1, np.int32) if stop is None else stop
    cdef cnp.ndarray cn = np.zeros(2, np.uint64) if counters is None else counters
    if st.dtype != np.int32 or cn.dtype != np.uint64 or cn.shape[0] < 2:
        raise ValueError("gen_files: stop is int32[1], counters uint64[2]")
    enc_t = [os.fsencode(p) for p in tmps] if suffix is None else None
    enc_f = [os.fsencode(p) for p in finals]
    cdef dc_gen_file *files = <dc_gen_file *>calloc(max(n, 1), sizeof(dc_gen_file))
    cdef dc_gen_error err
    cdef int rc
    cdef unsigned flags = (DC_GEN_FSYNC if fsync else 0) | (DC_GEN_DIRECT if direct else 0)
    if files == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            if suffix is None:
                files[i].tmp = enc_t[i]
            else:
                files[i].tmp_suffix = suffix
            files[i].path = enc_f[i]
            files[i].seed = (<uint64_t *>cnp.PyArray_DATA(sd))[i]
            files[i].first_seg = (<uint64_t *>cnp.PyArray_DATA(fi))[i]
            files[i].nsegs = (<uint64_t *>cnp.PyArray_DATA(ct))[i]
        memset(&err, 0, sizeof(err))
        with nogil:
            rc = dc_gen_files(files, <uint64_t>n, <const dc_gen_seg *>cnp.PyArray_DATA(a), &blv[0], flags,
                              <volatile int *>cnp.PyArray_DATA(st), <uint64_t *>cnp.PyArray_DATA(cn),
                              <uint64_t *>cnp.PyArray_DATA(cn) + 1, &err)
    finally:
        free(files)
    if rc == -125:  # ECANCELED: stopped between files
        return False
    if rc < 0:
        what = err.what.decode(errors="replace")
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}", os.fsdecode(enc_f[err.file]) if n else None)
    return True
