"""dlio.report.dlio.files: a hand-built Result (2 ranks, 2 epochs) rendered; every figure recomputed here."""

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from dlio import _core
from dlio.report import exact, run_files
from dlio.report.dlio import files as dlio_files
from dlio.report.result import RUN_SCHEMA
from dlio.system import stats

REC = 4096.0  # nominal record_length_bytes
MIB = REC / 2**20

# per (rank, epoch): DLIO au, DLIO throughput (per rank), exact au, exact sps, exact bytes, exact window
FIG = {
    (0, 1): (90.0, 100.0, 91.0, 110.0, 8_000_000, 2.0),
    (0, 2): (80.0, 120.0, 81.0, 130.0, 8_000_000, 1.6),
    (1, 1): (70.0, 140.0, 71.0, 150.0, 6_000_000, 2.5),
    (1, 2): (96.0, 160.0, 97.0, 170.0, 6_000_000, 1.5),
}
EVAL = {(0, 1): (50.0, 10.0), (0, 2): (60.0, 12.0), (1, 1): (70.0, 14.0), (1, 2): (80.0, 16.0)}
LAT = {0: [1000, 2000, 3000], 1: [4000, 5000]}  # per rank, each epoch (ns)


OFF_NS = 1_700_000_000 * 10**9  # each rank's wall clock - monotonic clock
BLOCK_DELAY = 0.5  # a block starts this long after its epoch's start (the plan is made in between)


def wall_ns(ts):
    return int(round(datetime.fromisoformat(ts).timestamp() * 1e6)) * 1000


def later(ts, seconds):
    """A DLIO timestamp `seconds` after another one."""
    return (datetime.fromisoformat(ts) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")


def block(r, e):
    au, thr, xau, xsps, xb, xw = FIG[(r, e)]
    load = [0.5 + r, 0.01 * e, 0.02]
    comp = [0.1, 0.1, 0.1]
    t0 = wall_ns(f"2025-01-0{e}T00:00:00.000000") + int(BLOCK_DELAY * 1e9) - OFF_NS
    return {
        "steps": 3,
        "start_ns": t0,
        "end_ns": t0 + int((1.25 + r + e / 10) * 1e9),
        "duration_s": 1.25 + r + e / 10,
        "load": load,
        "compute": comp,
        "proc": [a + b for a, b in zip(load, comp)],
        "au": au,
        "throughput": thr,
        "exact": {
            "window_s": xw,
            "steps": 2,
            "au_percentage": xau,
            "samples_per_second": xsps,
            "bytes": xb,
            "bytes_per_second": xb / xw,
            "io_wait_mean_s": 0.001 * (r + e),
            "io_wait_p99_s": 0.01 * (r + e),
            "io_wait_max_s": 0.02,
            "compute_mean_s": 0.1,
            "compute_total_s": 0.2,
        },
    }


def eval_block(r, e):
    au, thr = EVAL[(r, e)]
    b = block(r, e)
    b.update(au=au, throughput=thr, duration_s=0.333 + r)
    return b


def make_result(with_eval=True, metric_au=0.80):
    ranks = []
    for r in range(2):
        eps = []
        for e in (1, 2):
            h = stats.to_json(_core.hist_from_values(LAT[r]))
            eps.append(
                {
                    "epoch": e,
                    "start": f"2025-01-0{e}T00:00:00.000000",
                    "train_end": f"2025-01-0{e}T00:00:05.000000",
                    "end": f"2025-01-0{e}T00:00:09.000000",
                    "eval_start": f"2025-01-0{e}T00:00:06.000000",
                    "duration_s": 3.14159 + r + e,
                    "train": block(r, e),
                    "eval": eval_block(r, e) if with_eval else None,
                    "lat": h,
                    "sample_lat": h,
                    "bytes": FIG[(r, e)][4] + 100,
                    "ops": 7,
                    "samples": 12,
                    "steps_planned": 3,
                    "steps_done": 3,
                    "plan_bytes": FIG[(r, e)][4],
                    "cpu_s": 0.006,
                    "complete": True,
                }
            )
        ranks.append(
            {"rank": r, "hostname": "hostA" if r == 0 else "hostB", "epochs": eps, "wall_minus_mono_ns": OFF_NS}
        )
    return {
        "schema": RUN_SCHEMA,
        "complete": True,
        "reason": None,
        "workload": "default",
        "config_file": None,
        "scale": 1.0,
        "model": "default",
        "start": "2025-01-01T00:00:00.000000",
        "end": "2025-01-02T00:00:10.000000",
        "comm_size": 2,
        "hostnames": ["hostA", "hostB"],
        "host": {
            "cpu_count": 8,
            "processor_name": "TestCPU",
            "memory_bytes": 16 * 2**30,
            "memory_GB": 16.0,
            "cpuinfo": {"model name": "TestCPU"},
            "meminfo": {"MemTotal": "16777216 kB"},
        },
        "settings": {
            "record_length_bytes": REC,
            "metric_au": metric_au,
            "batch_size": 4,
            "batch_size_eval": 1,
            "exclude_start_steps": 1,
            "exclude_end_steps": 0,
        },
        "dataset": {
            "folder": "/d",
            "format": "npz",
            "num_files_train": 64,
            "num_files_eval": 8,
            "num_samples_per_file": 1,
            "bytes_on_disk": 3 * 2**30,
        },
        "environment": {},
        "ranks": ranks,
    }


def pstd(xs):
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5


AU = [(90.0 + 70.0) / 2, (80.0 + 96.0) / 2]  # mean over ranks per epoch: 80, 88
THR = [100.0 + 140.0, 120.0 + 160.0]  # summed over ranks: 240, 280


def test_summary_figures():
    s = dlio_files.summary(make_result())
    m = s["metric"]
    assert m["train_au_percentage"] == pytest.approx(AU)
    assert m["train_au_mean_percentage"] == pytest.approx(84.0)
    assert m["train_au_stdev_percentage"] == pytest.approx(pstd(AU))
    assert m["train_throughput_samples_per_second"] == pytest.approx(THR)
    assert m["train_throughput_mean_samples_per_second"] == pytest.approx(260.0)
    assert m["train_throughput_stdev_samples_per_second"] == pytest.approx(20.0)
    assert m["train_io_mean_MB_per_second"] == pytest.approx(260.0 * REC / 2**20)
    assert m["train_io_stdev_MB_per_second"] == pytest.approx(20.0 * REC / 2**20)
    assert m["train_au_meet_expectation"] == "success"  # 84 >= 80
    eau = [(50 + 70) / 2, (60 + 80) / 2]
    ethr = [10 + 14, 12 + 16]
    assert m["eval_au_percentage"] == pytest.approx(eau)
    assert m["eval_au_mean_percentage"] == pytest.approx(65.0)
    assert m["eval_throughput_samples_per_second"] == pytest.approx(ethr)
    assert m["eval_throughput_mean_samples_per_second"] == pytest.approx(26.0)
    assert m["eval_io_mean_MB_per_second"] == pytest.approx(26.0 * MIB)
    assert m["eval_au_meet_expectation"] == "fail"  # 65 < 80
    assert s["epochs"] == 2 and s["num_accelerators"] == 2 and s["num_hosts"] == 2
    assert s["hostname"] == "hostA"
    assert (s["num_files_train"], s["num_files_eval"], s["num_samples_per_file"]) == (64, 8, 1)
    # one entry per host (DLIO's per-node lists); neither rank recorded its own, so rank 0's host's
    assert s["host_cpu_count"] == [8, 8] and s["host_memory_GB"] == [16.0, 16.0]
    assert s["data_size_per_host_GB"] == pytest.approx(1 * 1 * 64 // 2 * REC / 2**30)  # 1 rank per host
    assert s["potential_caching"] == [1, 1]
    assert s["host_cpuinfo"] == {"model name": "TestCPU"} and s["host_meminfo"] == {"MemTotal": "16777216 kB"}
    for k in (
        "start",
        "end",
        "num_accelerators",
        "num_hosts",
        "hostname",
        "epochs",
        "num_files_train",
        "num_files_eval",
        "num_samples_per_file",
        "host_cpu_count",
        "host_processor_name",
        "host_cpuinfo",
        "host_meminfo",
        "host_memory_GB",
        "data_size_per_host_GB",
        "potential_caching",
        "metric",
    ):
        assert k in s, k


@pytest.mark.parametrize("metric_au,want", [(0.84, "success"), (0.8400001, "fail"), (0.5, "success"), (0.99, "fail")])
def test_au_meet_expectation_threshold(metric_au, want):
    assert dlio_files.summary(make_result(metric_au=metric_au))["metric"]["train_au_meet_expectation"] == want


@pytest.mark.parametrize(
    "rec_mib,hosts,want",
    [(96, ["a", "b"], 1), (640, ["a", "b"], 0), (320, ["a", "a"], 0), (256, ["a", "a"], 0), (128, ["a", "a"], 1)],
)
def test_data_size_and_potential_caching_per_host(rec_mib, hosts, want):
    """DLIO: data_size_per_host = ranks per host * samples per file * train files // ranks * record
    length (not the bytes on disk); potential caching where that is below the host's memory (16 GiB).
    At equality (256 MiB x 64) summary.json says 0 and {rank}_output.json 1, as DLIO's two tests do."""
    res = make_result()
    res["settings"]["record_length_bytes"] = rec_mib * 2**20
    res["dataset"]["bytes_on_disk"] = 123 * 2**30  # not what the field counts
    res["hostnames"] = hosts
    for r, h in zip(res["ranks"], hosts):
        r["hostname"] = h
    per_host = len(hosts) // len(set(hosts))  # 2 ranks: 1 per host on 2 hosts, 2 on one
    gib = (per_host * 1 * 64 // 2) * rec_mib / 1024
    s = dlio_files.summary(res)
    assert s["data_size_per_host_GB"] == pytest.approx(gib)
    assert s["potential_caching"] == [want] * len(set(hosts))
    assert s["num_hosts"] == len(set(hosts))
    assert dlio_files.rank_output(res, 0)["potential_caching"] == int(gib <= 16.0)
    assert exact.exact(res)["dataset_bytes_on_disk_per_host"] == 123 * 2**30 / len(set(hosts))


def test_summary_without_eval_has_no_eval_keys():
    m = dlio_files.summary(make_result(with_eval=False))["metric"]
    assert not [k for k in m if k.startswith("eval_")]


def test_summary_epochs_present_on_every_rank_only():
    res = make_result()
    res["ranks"][1]["epochs"].pop()  # rank 1 interrupted before epoch 2
    m = dlio_files.summary(res)["metric"]
    assert m["train_au_percentage"] == pytest.approx([80.0])
    assert m["train_throughput_samples_per_second"] == pytest.approx([240.0])


def test_rank_output():
    res = make_result()
    for r in range(2):
        o = dlio_files.rank_output(res, r)
        for k in (
            "hostname",
            "host_cpu_count",
            "host_processor_name",
            "host_memory_GB",
            "potential_caching",
            "host_cpuinfo",
            "host_meminfo",
        ):
            assert k in o, k
        assert o["hostname"] == ("hostA", "hostB")[r]
        assert [k for k in o if k.isdigit()] == ["1", "2"]
        for e in (1, 2):
            rec = o[str(e)]
            b, ev = block(r, e), eval_block(r, e)
            assert rec["load"] == {"block1": b["load"], "eval": ev["load"]}
            assert rec["proc"]["block1"] == pytest.approx([x + 0.1 for x in b["load"]])
            assert rec["compute"]["block1"] == [0.1, 0.1, 0.1]
            assert rec["au"] == {"block1": FIG[(r, e)][0], "eval": EVAL[(r, e)][0]}
            assert rec["throughput"] == {"block1": FIG[(r, e)][1], "eval": EVAL[(r, e)][1]}
            assert rec["end"] == f"2025-01-0{e}T00:00:09.000000"


def test_per_epoch_stats():
    res = make_result()
    p = dlio_files.per_epoch_stats(res, 1)
    assert list(p) == ["1", "2"]
    e1 = p["1"]
    assert list(e1) == ["start", "block1", "end", "duration", "eval"]  # DLIO's order
    # current DLIO: end after the evaluation (end_epoch), duration to the end of training (end_train)
    assert e1["start"] == "2025-01-01T00:00:00.000000" and e1["end"] == "2025-01-01T00:00:09.000000"
    assert e1["duration"] == "5.00"
    dur = 1.25 + 1 + 0.1  # rank 1, epoch 1
    assert e1["block1"] == {
        "start": later(e1["start"], BLOCK_DELAY),
        "end": later(e1["start"], BLOCK_DELAY + dur),
        "duration": f"{dur:.2f}",
    }
    assert e1["eval"] == {
        "start": "2025-01-01T00:00:06.000000",
        "end": "2025-01-01T00:00:09.000000",
        "duration": "3.00",
    }
    assert "eval" not in dlio_files.per_epoch_stats(make_result(with_eval=False), 0)["1"]


def test_exact_figures():
    x = exact.exact(make_result())
    assert x["au_percentage"] == pytest.approx([(91 + 71) / 2, (81 + 97) / 2])
    assert x["au_mean_percentage"] == pytest.approx(85.0)
    assert x["samples_per_second"] == pytest.approx([260.0, 300.0])
    assert x["samples_per_second_mean"] == pytest.approx(280.0)
    bps = [14_000_000 / 2.5, 14_000_000 / 1.6]  # all ranks' bytes over the slowest window
    assert x["bytes_per_second"] == pytest.approx(bps)
    assert x["MiB_per_second_mean"] == pytest.approx(sum(bps) / 2 / 2**20)
    lat = x["read_latency_ns"]
    assert lat["count"] == 2 * (3 + 2) and lat["min"] == 1000 and lat["max"] == 5000
    assert lat["mean"] == pytest.approx(2 * (6000 + 9000) / 10)
    assert abs(lat["p50"] - 3000) <= 30  # 5th of 10 values, histogram <1% error
    assert x["io_wait_per_step_s"]["mean"] == pytest.approx(np.mean([0.001 * (r + e) for r in (0, 1) for e in (1, 2)]))
    assert x["io_wait_per_step_s"]["p99"] == pytest.approx(0.03)
    # 12 train + 3 eval samples (batch_size_eval 1) per rank-epoch; cpu_s covers both
    assert x["cpu_us_per_sample"] == pytest.approx(4 * 0.006 / (4 * 15) * 1e6)
    assert exact.exact(make_result(with_eval=False))["cpu_us_per_sample"] == pytest.approx(4 * 0.006 / 48 * 1e6)
    assert x["bytes_read"] == 2 * 8_000_100 + 2 * 6_000_100
    assert x["slowest_rank_epoch_seconds"] == pytest.approx([3.14159 + 2, 3.14159 + 3])
    assert [p["bytes"] for p in x["per_rank"]] == [16_000_200, 12_000_200]
    assert x["per_rank"][1]["au_percentage"] == [71.0, 97.0]
    assert x["dlio_compat"]["train_au_percentage"] == pytest.approx(AU)


def test_metric_lines():
    lines = dlio_files.metric_lines(make_result())
    sd_au, sd_thr = pstd(AU), 20.0
    assert lines[0] == lines[-1] == "[METRIC] " + "=" * 58
    assert "[METRIC] Number of Simulated Accelerators: 2" in lines
    assert f"[METRIC] Training Accelerator Utilization [AU] (%): 84.0000 ({sd_au:.4f})" in lines
    assert "[METRIC] Training Throughput (samples/second): 260.0000 (20.0000)" in lines
    assert f"[METRIC] Training I/O Throughput (MB/second): {260 * MIB:.4f} ({sd_thr * MIB:.4f})" in lines
    assert "[METRIC] train_au_meet_expectation: success" in lines
    assert "[METRIC] Eval Throughput (samples/second): 26.000000 (2.000000)" in lines
    assert "[METRIC] eval_au_meet_expectation: fail" in lines
    assert not any("Eval" in l for l in dlio_files.metric_lines(make_result(with_eval=False)))
    table = exact.exact_table(make_result())
    # 8 rows, then one line per host (the fixture's ranks are on hostA and hostB), then the straggler: hostB's
    # batches come later (its loads are longer), with its evidence in 3 lines
    assert len(table) == 14
    assert table[8].startswith("host hostA (ranks 0): AU") and table[9].startswith("host hostB (ranks 1): AU")
    assert table[10].startswith("straggler: host hostB (ranks 1) is ") and table[10].endswith("its reads were late")


def test_write_all(tmp_path):
    res = make_result()
    run_files.write_all(res, str(tmp_path / "out"), "workload:\n  model:\n    name: default\n")
    out = tmp_path / "out"
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "0_output.json",
        "0_per_epoch_stats.json",
        "1_output.json",
        "1_per_epoch_stats.json",
        "config.yaml",
        "dlio-fast.json",
        "dlio.log",
        "summary.json",
    ]
    s = json.loads((out / "summary.json").read_text())
    assert s["metric"]["train_au_mean_percentage"] == pytest.approx(84.0)
    assert s == json.loads(json.dumps(dlio_files.summary(res)))
    for r in (0, 1):
        o = json.loads((out / f"{r}_output.json").read_text())
        assert o["1"]["au"]["block1"] == FIG[(r, 1)][0]
        pe = json.loads((out / f"{r}_per_epoch_stats.json").read_text())
        assert set(pe) == {"1", "2"}
    d = json.loads((out / "dlio-fast.json").read_text())
    assert d["schema"] == RUN_SCHEMA
    assert d["metrics"]["bytes_read"] == 28_000_400
    assert len(d["ranks"]) == 2 and d["ranks"][0]["epochs"][0]["lat"]["count"] == 3
    assert (out / "config.yaml").read_text().startswith("workload:")
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_an_interrupted_run_never_meets_the_expectation():
    res = make_result(metric_au=0.5)
    assert dlio_files.summary(res)["metric"]["train_au_meet_expectation"] == "success"
    res["complete"] = False
    m = dlio_files.summary(res)["metric"]
    assert m["train_au_meet_expectation"] == "fail" and m["eval_au_meet_expectation"] == "fail"
    assert "train_au_meet_expectation: success" not in "\n".join(dlio_files.metric_lines(res))
