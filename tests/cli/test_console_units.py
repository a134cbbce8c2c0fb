"""One unit system on the console (issue 30): every table and line a newcomer's walk prints (the dry
runs, generation, a training run with its status lines, checkpoints, io, ceiling, report, check,
datasize) is read back and held to the rules of dlio.base.units: no size rounded to zero ("0.00 GiB"), no
scientific notation ("1.46601e+08 bytes"), binary units only (DLIO's own "GB" / "MB" lines labelled as
GiB / MiB), latencies past 10,000 us in ms, and every AU saying which it is (exact or DLIO's formula)."""

import re

import pytest
from conftest import TINY_KV_CONFIG, TINY_MODEL_LOAD

from dlio.base import units

RULES = [
    (re.compile(r"(?<![\d.,])0\.0+ ?[KMGTP]i?B\b"), "a size rounded to zero"),
    (re.compile(r"\d(?:\.\d+)?e[+-]\d+"), "scientific notation"),
    (re.compile(r"(?<![\d.,])(?:\d{5,}|\d{1,3}(?:,\d{3})+)(?:\.\d+)? ?us\b"), "10,000 us or more not in ms"),
    (re.compile(r"(?<![\d.,])(?:\d{5,}|\d{1,3}(?:,\d{3})+)(?:\.\d+)? ?ms\b"), "10,000 ms or more not in s"),
]
FMT_NS = r"\d+(?:\.\d+)?(?:ns|us|ms|s)"  # units.fmt_ns: 850ns, 73.2us, 1.25ms, 13.35s
DECIMAL = re.compile(r"\b[GMT]B\b")  # a decimal unit: DLIO's own lines only, labelled
AU = re.compile(r"\bAU\b")


def violations(text):
    """(line, what is wrong) for every console line that breaks a rule."""
    out = []
    for line in text.splitlines():
        out += [(line, why) for rx, why in RULES if rx.search(line)]
        if DECIMAL.search(line) and not re.search(r"\[DLIO's [GM]B = [GM]iB\]", line):
            out.append((line, "a decimal unit (GB, MB) that is not DLIO's, labelled"))
        if AU.search(line) and not re.search(r"exact|DLIO", line):
            out.append((line, "an AU that does not say which (exact or DLIO's formula)"))
    return out


def test_the_rules_catch_what_the_review_found():
    bad = [
        "size on disk        0.00 GiB (record 1.46601e+08 bytes)",
        "read latency p50 / p99 / p99.9  59.1 / 8028.2 / 55836.7 us",
        "Throughput: 0.3196 GB/s",
        "[status] epoch 1 train: 8/16 steps  63.5 samples/s  14.0 MiB/s  AU 88.9 %",
        "    device P95 read 13354.66 ms, write 2.10 ms (max over ranks and trials)",
    ]
    assert [why for _, why in violations("\n".join(bad))] == [
        "a size rounded to zero",
        "scientific notation",
        "10,000 us or more not in ms",
        "a decimal unit (GB, MB) that is not DLIO's, labelled",
        "an AU that does not say which (exact or DLIO's formula)",
        "10,000 ms or more not in s",
    ]
    assert units.dlio_line("Throughput: 0.3196 GB/s") == f"Throughput: 0.3196 GB/s {units.DLIO_GB}"
    assert units.fmt_bytes(4096 * 72) == "288.0 KiB" and units.fmt_num(146600628) == "146,600,628"
    assert units.fmt_num(0.00002) == "0.00002" and units.fmt_us(55836.7) == "55.84ms"


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The console of a short walk through the commands, each (name, stdout + stderr)."""
    from dlio.cli.main import main

    d = tmp_path_factory.mktemp("walk")
    (d / "iot").mkdir()
    kv = d / "kv.yaml"
    kv.write_text(TINY_KV_CONFIG)
    small = ["--set", f"dataset.data_folder={d / 'data'}", "--set", "workflow.evaluation=false"]
    ckpt = [
        "--scale", "0.001", "--set", "checkpoint.num_checkpoints_write=1", "--set", "checkpoint.num_checkpoints_read=1",
        "--set", "checkpoint.time_between_checkpoints=0", "--set", f"checkpoint.checkpoint_folder={d / 'ck'}",
    ]  # fmt: skip
    commands = {
        "dry-run unet3d": ["run", "-w", "unet3d", "--dry-run"],
        "dry-run llama": ["run", "-w", "llama_8b_zero3", "--scale", "0.001", "--dry-run"],
        "generate": ["generate", "-w", "default", *small],
        "generate dry-run": ["generate", "-w", "default", *small, "--dry-run"],
        "run": [
            "run", "-w", "default", *small, "--set", "train.epochs=1", "--set", "train.computation_time=0.03",
            "--status-interval", "0.1", "-o", str(d / "run"),
        ],
        "checkpoints": ["run", "-w", "llama_8b_zero3", *ckpt, "-o", str(d / "ck_out")],
        "io": ["io", str(d / "iot"), "--bs", "4k,128k", "--file-size", "4m", "--runtime", "0.2s"],
        "ceiling": [
            "ceiling", str(d / "iot"), "--file-size", "4m", "--runtime", "0.05s", "--max-threads", "1",
            "--max-qd", "2",
        ],
        "report": ["report", str(d / "run")],
        "check": ["check", str(d / "run")],
        "datasize": ["datasize", "-w", "unet3d_b200", "-n", "8", "--host-memory", "512g"],
        "model load": [
            "run", "-w", "load_llama3_8b", "-o", str(d / "ml"),
            *[a for kv in (*TINY_MODEL_LOAD, f"checkpoint.checkpoint_folder={d / 'model'}") for a in ("--set", kv)],
        ],
        "kv cache": ["run", "--config", str(kv), "--set", f"kvcache.cache_dir={d / 'kvc'}", "-o", str(d / "kv")],
        "vector search": [
            "run", "-w", "vdb_diskann_1m", "-o", str(d / "vdb"),
            *[a for kv in ("vdb.vectors=4000", "vdb.processes=2", "vdb.batch=3", "vdb.runs=1", "vdb.queries=40",
                           "vdb.search_list=48", f"vdb.index_folder={d / 'idx'}") for a in ("--set", kv)],
        ],
    }  # fmt: skip
    out = {}
    for name, args in commands.items():
        capsys_out = _run(main, args)
        out[name] = capsys_out
    return out


def _run(main, args):
    import contextlib
    import io

    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            main(args)
        except SystemExit as e:
            assert e.code in (None, 0, 1), (args, se.getvalue())  # check exits 1 on a failed rule
    return so.getvalue() + se.getvalue()


def test_every_console_line_keeps_to_one_unit_system(walk):
    bad = {name: violations(text) for name, text in walk.items()}
    assert {k: v for k, v in bad.items() if v} == {}
    # what the walk shows: the lines that broke the rules before
    assert "size on disk" in walk["dry-run unet3d"] and "146,600,628 bytes" in walk["dry-run unet3d"]
    assert re.search(r"Starting data generation: 72 files, [\d.]+ KiB", walk["generate"])
    assert "[status] epoch 1 train:" in walk["run"] and "exact AU" in walk["run"]
    assert "Accelerator Utilization [AU] (%): " in walk["run"] and units.DLIO_FORMULA in walk["run"]
    assert f"GB/s {units.DLIO_GB}" in walk["checkpoints"] and "by memory" in walk["datasize"]
    # the families: binary sizes beside their GiB/s, latencies in fmt_ns's scale (not "13354.66 ms")
    assert re.search(r"Load \d+ \[.*\]: ready in [\d.]+ s, [\d.]+ [KMG]iB read, [\d.]+ GiB/s", walk["model load"])
    assert re.search(rf"device read P95 {FMT_NS} P99 {FMT_NS}, write P95 {FMT_NS} P99 {FMT_NS}", walk["kv cache"])
    assert re.search(rf"latency \(vdbbench's\) mean {FMT_NS}, p95 {FMT_NS}, p99 {FMT_NS}", walk["vector search"])
