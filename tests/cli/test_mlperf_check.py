"""`dlio-fast check --rules v3.0`: run folders that pass, and folders that fail each rule for the
right reason (hand-made dlio-fast.json documents with known figures, and real checkpoint runs)."""

import glob
import os
import re
import shutil
import tempfile

import pytest
import yaml
from conftest import set_args
from test_report_cmd import ckpt_record, make_result, write_run

from dlio.config.load import load_config
from dlio.mlperf import checks_v3
from dlio.system.host import memory_filesystem

GiB = 1 << 30
# make_result: batch 4, 1 MiB per step -> record 262144 B; 1 GiB RAM, 1 host, 1 accelerator:
# Rules 3.1.2 gives max(500 x 4 x 1, ceil(1 GiB x 5 / 262144)) = max(2000, 20480) = 20480 samples.
RULE_FILES = 20480


def v3_result(i=0, workload="unet3d_b200", compute_ms=19.0, files=RULE_FILES, **kw):
    """Run i of a series: 1 ms wait + compute_ms per step (AU = compute / (1 + compute)), minute i;
    each epoch read from storage (verdict storage-bound)."""
    r = make_result(workload=workload, compute_ms=compute_ms, **kw)
    r["dataset"]["num_files_train"] = files
    r["start"], r["end"] = f"2025-03-01T10:0{i}:00", f"2025-03-01T10:0{i}:30"
    r["verdicts"] = [
        {"phase": f"epoch {e}", "epoch": e, "host": "node0", "verdict": "storage-bound", "reason": "device 1.00x"}
        for e in (1, 2)
    ]
    return r


def closed_config(workload="unet3d_b200", files=RULE_FILES, *sets):
    """The config.yaml a run of the built-in workload writes, with only tunable parameters changed (and
    `sets`)."""
    return load_config(
        workload=workload,
        sets=[f"dataset.num_files_train={files}", "dataset.data_folder=/data/x", "reader.read_threads=8", *sets],
        env={},
    ).to_yaml()


def series(tmp_path, n=6, change=None):
    out = []
    for i in range(n):
        r = v3_result(i)
        if change:
            change(i, r)
        out.append(write_run(tmp_path / f"r{i}", r))
        (tmp_path / f"r{i}" / "config.yaml").write_text(closed_config())
    return out


def by_rule(stdout):
    """{rule name: (result, figure)} from the table (up to the roll-up per rule)."""
    rows = {}
    for line in stdout.split("\n\n")[0].splitlines()[2:]:
        if line.startswith(("PASS", "FAIL")):
            res, rest = line[:6].strip(), line[8:]
            name, _, fig = rest.partition("  ")
            rows[name.strip()] = (res, fig.strip())
    return rows


def test_six_run_series_passes_every_rule(tmp_path, run_cli):
    code, out, err = run_cli("check", "--rules", "v3.0", *series(tmp_path))
    assert code == 0, out + err
    rows = by_rule(out)
    assert rows["2.1.17 unet3d_b200: 1 warm-up + 5 consecutive runs"] == ("PASS", "warm-up r0, runs r1, r2, r3, r4, r5")
    assert rows["r0: Table 1 AU (exact) >= 90 %"][1].startswith("AU 95.00 %")
    assert "the rule gives 20480 files = max(2000 by steps, 20480 by" in rows["r0: 3.1.2 dataset size"][1]
    assert rows["r0: 3.3.4 clients"][0] == "PASS"
    assert out.splitlines()[0] == "MLPerf Storage v3.0 rules"


def rollup_rows(stdout):
    """{rule: (result, passed, failed by)} from the roll-up per rule after the table."""
    lines = stdout.split("\n\n")[1].splitlines()
    assert lines[1].split() == ["result", "rule", "/", "check", "passed", "failed", "by"]
    rows = {}
    for line in lines[2:]:
        if line.startswith(("PASS", "FAIL")):
            rule, count, failed = re.match(r"\S+\s+(.+?)\s{2,}(\d+ of \d+)\s*(.*)$", line).groups()
            rows[rule] = (line[:4], count, failed)
    return rows


def test_rollup_per_rule_counts_each_rule_over_the_results(tmp_path, run_cli):
    """After the per-check lines, one line per rule: PASS/FAIL, how many results passed it, which failed."""

    def two_from_cache(i, r):
        if i in (2, 4):  # r2 and r4 read one epoch from the page cache: 6.6 fails for them only
            r["verdicts"][0]["verdict"] = "cache"

    code, out, _ = run_cli("check", "--rules", "v3.0", *series(tmp_path, change=two_from_cache))
    assert code == 1
    rows = rollup_rows(out)
    assert rows["6.6 reads from storage, not the page cache"] == ("FAIL", "4 of 6", "r2, r4")
    assert rows["Table 1 AU (exact) >= 90 %"] == ("PASS", "6 of 6", "")
    assert rows["run complete"] == ("PASS", "6 of 6", "")
    assert rows["2.1.17 unet3d_b200: 1 warm-up + 5 consecutive runs"] == ("PASS", "1 of 1", "")
    # every check of the table is counted once in its rule
    table = by_rule(out)
    assert sum(int(c.split(" of ")[1]) for _, c, _ in rows.values()) == len(table)
    assert out.split("\n\n")[1].startswith(f"per rule ({len(rows)})")


def test_default_rules_follow_the_runs_workload(tmp_path, run_cli):
    code, out, _ = run_cli("check", *series(tmp_path))
    assert code == 0 and out.startswith("MLPerf Storage v3.0 rules")
    a = write_run(tmp_path / "h", make_result(workload="unet3d_h100", compute_ms=19.0))
    code, out, _ = run_cli("check", a)
    assert "MLPerf Storage" not in out and "PASS  dataset >= 5x host RAM" in out  # v2.0 lines, as before


@pytest.mark.parametrize(
    "workload,compute_ms,ok",
    [
        ("unet3d_b200", 8.0, False),  # 88.9 % < 90
        ("retinanet_b200", 8.0, True),  # 88.9 % >= 85
        ("retinanet_b200", 5.0, False),
    ],
)  # 83.3 % < 85
def test_au_threshold_is_the_workloads(workload, compute_ms, ok):
    (name, passed, fig), _ = checks_v3.check_au(v3_result(workload=workload, compute_ms=compute_ms))
    assert passed is ok and name == f"Table 1 AU (exact) >= {85 if 'retina' in workload else 90} %"
    assert fig.startswith(f"AU {100 * compute_ms / (1 + compute_ms):.2f} %")


def test_dataset_size_at_least_and_exact(tmp_path):
    assert not checks_v3.check_datasize(v3_result(files=RULE_FILES - 1), None)[1]
    assert checks_v3.check_datasize(v3_result(files=RULE_FILES + 1), None)[1]
    name, ok, fig = checks_v3.check_datasize(v3_result(files=RULE_FILES + 1), GiB)  # --ram declares: exact
    assert (name, ok) == ("3.1.2 dataset size (3.3.1 exact)", False) and "need exactly that" in fig
    assert checks_v3.check_datasize(v3_result(), GiB)[1]


def test_series_fails_for_count_settings_and_overlap(tmp_path, run_cli):
    name = "2.1.17 unet3d_b200: 1 warm-up + 5 consecutive runs"
    code, out, _ = run_cli("check", "--rules", "v3.0", *series(tmp_path / "a", n=5))
    assert code == 1 and by_rule(out)[name] == ("FAIL", "5 run(s), need 6 (1 warm-up + 5)")

    def threads(i, r):
        if i == 3:
            r["settings"]["read_threads"] = 2

    code, out, _ = run_cli("check", "--rules", "v3.0", *series(tmp_path / "b", change=threads))
    assert by_rule(out)[name] == ("FAIL", "r3 has other settings than r0")

    def overlap(i, r):
        if i == 2:
            r["start"] = "2025-03-01T10:01:10"  # run 1 ends at 10:01:30

    code, out, _ = run_cli("check", "--rules", "v3.0", *series(tmp_path / "c", change=overlap))
    assert by_rule(out)[name] == ("FAIL", "r2 started before the previous run ended")


def test_seven_runs_keep_a_consecutive_window():
    docs = [v3_result(i) for i in range(7)]
    docs[0]["settings"]["read_threads"] = 9  # a stray first run: the window r1..r6 is the result
    ((name, ok, fig),) = checks_v3.check_series(docs, [f"r{i}" for i in range(7)])
    assert ok and fig == "warm-up r1, runs r2, r3, r4, r5, r6"


def test_clients_per_host():
    one = v3_result(ranks=3)
    assert checks_v3.check_clients(one) == ("3.3.4 clients", True, "single-host: 1 client, 3 accelerators")
    two = dict(one, hostnames=["a", "a", "b"])
    assert checks_v3.check_clients(two) == ("3.3.4 same accelerators per host", False, "a 2, b 1 accelerators")
    assert checks_v3.check_clients(dict(one, hostnames=["a", "b"], comm_size=2))[1]


def test_workload_outside_v3():
    assert checks_v3.check_workload(v3_result(workload="unet3d_h100")) == (
        "2.1.11 workload in v3.0",
        True,
        "unet3d_h100: v3.0 whatif",
    )
    assert not checks_v3.check_workload(v3_result(workload="resnet50_tf"))[1]


# ---- checkpoints: 10 writes then 10 reads, the gap, the cache flush -------------------------------


def ckpt_docs(n_write=10, n_read=10, gap_s=5.0, cache="dropped (2 files)", nbytes=GiB, ram=GiB):
    """A write run (saves 1 s each, 1 s apart) then a read run starting gap_s after the last save."""
    saves = [ckpt_record("save", 0, 1, 2.0 * i, 1.0, nbytes) for i in range(n_write)]
    t0 = 2.0 * (n_write - 1) + 1.0 + gap_s
    loads = [dict(ckpt_record("load", 0, 1, t0 + 2.0 * i, 1.0, nbytes), cache=cache) for i in range(n_read)]
    host = {"memory_bytes": ram}
    return [
        {"complete": True, "hostnames": ["n0"], "host": host, "ranks": [], "checkpoints": {"records": saves}},
        {"complete": True, "hostnames": ["n0"], "host": host, "ranks": [], "checkpoints": {"records": loads}},
    ]


def ck(docs):
    return {n.split(" ")[0]: (ok, fig) for n, ok, fig in checks_v3.check_checkpoints(docs, None)}


def test_checkpoint_rules_pass():
    c = ck(ckpt_docs(ram=4 * GiB))  # 10 GiB written < 3 x 4 GiB: the reads dropped it
    assert c["4.x"] == (True, "10 checkpoint writes, 10 reads")
    assert c["4.7.1"] == (True, "write ended -> read started: 5.00 s")
    assert c["4.3.1"][0] and "flush needed, 0 of 10 reads without it" in c["4.3.1"][1]


def test_checkpoint_rules_fail_for_the_right_reason():
    assert ck(ckpt_docs(n_write=9))["4.x"] == (False, "9 checkpoint writes, 10 reads")
    assert ck(ckpt_docs(gap_s=31.0))["4.7.1"] == (False, "write ended -> read started: 31.00 s")
    ok, fig = ck(ckpt_docs(cache="kept", ram=4 * GiB))["4.3.1"]  # 10 GiB written < 3 x 4 GiB, not flushed
    assert not ok and fig.endswith("flush needed, 10 of 10 reads without it")
    # 10 GiB written >= 3 x 1 GiB RAM: no flush needed, kept cache is fine
    assert ck(ckpt_docs(cache="kept", ram=GiB))["4.3.1"] == (
        True,
        "n0: wrote 10.0 GiB vs 3 x 1.0 GiB RAM; no flush needed",
    )


def test_real_checkpoint_runs_write_then_read(tmp_path, run_cli):
    """A real write run, then a real read run with the cache kept (RAM declared large): 4.3.1 fails,
    4.7.1 measures the gap between the two invocations."""
    base = [
        "run",
        "--workload",
        "llama_8b_zero3",
        "--scale",
        "0.0001",
        "-q",
        *set_args(f"checkpoint.checkpoint_folder={tmp_path / 'ck'}", "checkpoint.time_between_checkpoints=0"),
    ]
    assert (
        run_cli(
            *base,
            *set_args("checkpoint.num_checkpoints_write=10", "checkpoint.num_checkpoints_read=0"),
            "-o",
            tmp_path / "w",
        )[0]
        == 0
    )
    assert (
        run_cli(
            *base,
            *set_args("checkpoint.num_checkpoints_write=0", "checkpoint.num_checkpoints_read=10"),
            "--cache",
            "keep",
            "-o",
            tmp_path / "r",
        )[0]
        == 0
    )
    code, out, err = run_cli("check", "--rules", "v3.0", "--ram", "1g", tmp_path / "w", tmp_path / "r")
    rows = {n.split(" ")[0]: (res, fig) for n, (res, fig) in by_rule(out).items()}
    assert rows["4.x"] == ("PASS", "10 checkpoint writes, 10 reads")
    gap = float(rows["4.7.1"][1].split(": ")[1].split(" ")[0])
    assert rows["4.7.1"][0] == "PASS" and 0 <= gap < 30
    assert rows["4.3.1"][0] == "FAIL" and "flush needed, 10 of 10 reads without it" in rows["4.3.1"][1]
    assert code == 1


# ---- 3.6.2 CLOSED parameters and 6.6 the page cache (issue 30, usability bug 10) --------------------


def test_closed_parameters_from_the_config_and_from_the_recorded_settings():
    doc = v3_result()
    doc["config"] = yaml.safe_load(closed_config())  # tunables only: files, folder, read threads
    assert checks_v3.check_closed(doc) == (
        "3.6.2 CLOSED parameters unchanged",
        True,
        "only tunable parameters differ from unet3d_b200's (from config.yaml)",
    )
    doc["config"] = yaml.safe_load(closed_config("unet3d_b200", RULE_FILES, "reader.odirect=true"))
    assert checks_v3.check_closed(doc)[1]  # O_DIRECT is a CLOSED tunable for unet3d
    doc["config"] = yaml.safe_load(closed_config("unet3d_b200", RULE_FILES, "dataset.num_samples_per_file=2"))
    name, ok, fig = checks_v3.check_closed(doc)
    assert not ok and fig.startswith("1 CLOSED parameter(s) changed: dataset.num_samples_per_file 2 (workload: 1)")
    retina = dict(v3_result(workload="retinanet_b200"))
    retina["config"] = yaml.safe_load(closed_config("retinanet_b200", RULE_FILES, "reader.odirect=true"))
    assert "reader.odirect True (workload: False)" in checks_v3.check_closed(retina)[2]  # unet3d only
    # no config.yaml: the settings the result recorded (make_result: batch 4, 262144 B records, 19 ms)
    name, ok, fig = checks_v3.check_closed(v3_result())
    assert not ok and "(from the settings its result recorded (no config.yaml))" in fig
    assert (
        "dataset.record_length_bytes 262,144 (workload: 146,600,628)" in fig
        and "reader.batch_size 4 (workload: 7)" in fig
    )
    assert checks_v3.check_closed(v3_result(workload="unet3d_h100")) is None  # whatif: 2.1.11 says it


def test_page_cache_reads_fail_v3():
    doc = v3_result()
    doc["verdicts"][1] = dict(doc["verdicts"][1], verdict="cache", reason="device vda moved 0.01x")
    name, ok, fig = checks_v3.check_page_cache(doc)
    assert (name, ok) == ("6.6 reads from storage, not the page cache", False) and "epoch 2" in fig
    assert checks_v3.check_page_cache(v3_result())[1]
    assert checks_v3.check_page_cache(dict(v3_result(), verdicts=[])) == (
        "6.6 reads from storage, not the page cache",
        False,
        "no verdicts recorded: cannot tell",
    )


@pytest.fixture
def shm():
    if not os.path.isdir("/dev/shm") or memory_filesystem("/dev/shm") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    d = tempfile.mkdtemp(prefix="dlio-check-", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_closed_runs_with_an_overridden_record_size_from_the_page_cache_fail(run_cli, tmp_path, shm):
    """Usability bug 10, reproduced: unet3d_b200 (v3.0 CLOSED) with its record length overridden, run
    with dlio_fast.mlperf_rules=warn into a results tree 1 + 5 times (one epoch each), its reads served
    from memory. check --rules v3.0 fails 3.6.2 on the record length and 6.6 on the page-cache reads.
    (The dataset is on tmpfs, whose pages are the page cache: on the disk, the device counters of a
    machine shared with other jobs can hide a cached epoch, see dlio.report.verdict.)"""
    sets = [
        *set_args(
            "dataset.num_files_train=56",
            "dataset.record_length_bytes=524288",
            "dataset.record_length_bytes_stdev=0",
            f"dataset.data_folder={shm}",
        ),
    ]
    code, _, se = run_cli("-q", "generate", "-w", "unet3d_b200", *sets)
    assert code == 0, se
    for _ in range(6):
        code, _, se = run_cli(
            "-q", "run", "-w", "unet3d_b200", *sets, "--set", "train.epochs=1",
            "--set", f"dlio_fast.results_dir={tmp_path / 'res'}", "--set", "dlio_fast.mlperf_rules=warn",
        )  # fmt: skip
        assert code == 0, se
    runs = sorted(glob.glob(str(tmp_path / "res" / "training" / "unet3d" / "run" / "*")))
    assert len(runs) == 6
    code, out, _ = run_cli("check", "--rules", "v3.0", *runs)
    assert code == 1
    rows = by_rule(out)
    name = os.path.basename(runs[0])
    res, fig = rows[f"{name}: 3.6.2 CLOSED parameters unchanged"]
    assert res == "FAIL" and "dataset.record_length_bytes 524,288 (workload: 146,600,628)" in fig
    assert "train.epochs 1 (workload: 5)" in fig and "(from config.yaml)" in fig
    res, fig = rows[f"{name}: 6.6 reads from storage, not the page cache"]
    assert res == "FAIL" and "1 of 1 epoch verdict(s) are cache" in fig and "tmpfs" in fig


def test_a_refused_run_leaves_nothing_in_the_results_tree(run_cli, tmp_path):
    """Usability bug 9: a run the MLPerf dataset rule refuses, and a run refused after its folder was made
    (a dataset generated with another record length), leave no lock-only folder behind."""
    sets = [
        *set_args(
            "dataset.num_files_train=56",
            "dataset.record_length_bytes=65536",
            "dataset.record_length_bytes_stdev=0",
            f"dataset.data_folder={tmp_path / 'mlp'}",
        ),
    ]
    code, _, se = run_cli("-q", "generate", "-w", "unet3d_b200", *sets)
    assert code == 0, se
    code, _, se = run_cli("-q", "run", "-w", "unet3d_b200", *sets, "--set", f"dlio_fast.results_dir={tmp_path / 'res'}")
    assert code == 2 and "3.1.2" in se
    assert glob.glob(str(tmp_path / "res" / "training" / "unet3d" / "run" / "*")) == []
    other = [x.replace("65536", "131072") for x in sets]
    code, _, se = run_cli(
        "-q", "run", "-w", "unet3d_b200", *other, "--set", "dlio_fast.mlperf_rules=off", "-o", tmp_path / "o"
    )
    assert code == 2, se
    assert not os.path.exists(tmp_path / "o")
