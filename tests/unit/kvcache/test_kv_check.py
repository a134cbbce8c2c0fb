"""`dlio-fast check` of a KV-cache run: 'as Table KVCache-1' only for the run the table describes (the
reference's buffered file I/O on a local filesystem, no generation time, one file per entry, synthetic
users), and what ran said in every case, with the client that ran it."""

import pytest

from dlio.kvcache import check, results


def doc(**over):
    settings = {
        "model": "llama3.1-8b",
        "users": 200,
        "cpu_bytes": 0,
        "max_concurrent_allocs": 16,
        "duration_s": 300,
        "seed": 42,
        "trials": 3,
        "io_mode": "compat",
        "storage": "local_fs",
        "generation_mode": "none",
        "chunk_tokens": 0,
        "trace": None,
        "client": results.CLIENT,
    }
    settings.update(over)
    return {"workload": "kvcache_llama3_8b_opt1", "complete": True, "settings": settings, "records": []}


def rows(d):
    return {name: (ok, text) for name, ok, text in check.checks(d)}


CLOSED = "the option's CLOSED parameters (rules 6.3.1, 6.3.2)"


def test_the_reference_run_passes_as_the_table():
    r = rows(doc())
    assert r[CLOSED] == (True, "as Table KVCache-1")
    ok, text = r["what ran"]
    assert ok is None and "io mode compat, storage local_fs, generation mode none" in text
    assert "kv-cache.py" in text  # the client is named: not the reference's


@pytest.mark.parametrize(
    "key, value",
    [
        ("io_mode", "direct"),
        ("io_mode", "null"),
        ("storage", "s3"),
        ("generation_mode", "realistic"),
        ("chunk_tokens", 256),
        ("trace", "ops.csv"),
    ],
)
def test_what_the_table_does_not_describe_is_open(key, value):
    ok, text = rows(doc(**{key: value}))[CLOSED]
    assert ok is None and text.startswith("OPEN: ") and f"{key} {value}" in text


def test_a_document_without_trials_fails_and_a_hostile_one_is_one_line(tmp_path):
    """`check` does not believe what it reads: a KV document with no trials fails; NaN, a thousand-deep
    nesting or a record cut short is one line naming the file, never a traceback."""
    import json

    from dlio.base.errors import DlioError
    from dlio.kvcache.family import FAMILY

    checks = FAMILY.checks
    assert checks is not None

    def folder(name, text):
        d = tmp_path / name
        d.mkdir()
        (d / "dlio-fast.json").write_text(text)
        return str(d)

    lines = []
    bare = folder("bare", json.dumps({"schema": results.SCHEMA}))
    assert checks.main([bare], lines.append) == 1
    assert "FAIL  trials measured: no trial was measured" in lines
    for name, text in [
        ("nan", '{"schema": "%s", "complete": NaN}' % results.SCHEMA),
        ("deep", '{"schema": "%s", "x": %s1%s}' % (results.SCHEMA, "[" * 5000, "]" * 5000)),
        ("cut", json.dumps({"schema": results.SCHEMA, "complete": True, "records": [{"trial": 0}]})),
    ]:
        with pytest.raises(DlioError, match=f"{name}/dlio-fast.json"):
            d = folder(name, text)
            assert checks.load(d) is not None
            checks.main([d], lines.append)
    assert checks.load(folder("other", json.dumps({"schema": "dlio-fast.vdb/1"}))) is None
