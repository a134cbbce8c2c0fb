"""Runs across two simulated hosts (hA, hB) x 2 ranks on this machine, through Open MPI's mpirun and MPICH's
hydra (tests/multihost.py, tools/simhost-agent): every rank sees its host's name, so per-host logic (verdicts
per host, per-host figures) runs as on a cluster. Tiny workloads: a few seconds each."""

import json
import subprocess

import pytest
from conftest import REPO, TINY_KV_CONFIG, TINY_MODEL_LOAD, set_args
from multihost import HOSTS, dlio_argv, launcher_command, run_env

LAUNCHERS = ["openmpi", "mpich"]
FAST = ("train.computation_time=0.001", "evaluation.eval_time=0.001")


def launch(launcher, *args, timeout=240):
    cmd = launcher_command(launcher, HOSTS, 2, dlio_argv(*args))
    p = subprocess.run(cmd, env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with open(path) as f:
        return json.load(f)


def verdict_hosts(doc):
    return sorted({v["host"] for v in doc["verdicts"]})


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_each_host_has_its_name(launcher):
    cmd = launcher_command(launcher, HOSTS, 2, ["hostname"])
    p = subprocess.run(cmd, env=run_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == ["hA", "hA", "hB", "hB"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_training_with_checkpoints_and_evaluation(launcher, tmp_path):
    out = tmp_path / "out"
    code, so, se = launch(
        launcher,
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "dataset.num_files_train=32",
            "dataset.num_files_eval=16",
            "reader.batch_size=2",
            "train.epochs=2",
            "workflow.checkpoint=true",
            "checkpoint.checkpoint_after_epoch=1",
            "checkpoint.epochs_between_checkpoints=1",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
            "model.model_size=1048576",
            *FAST,
        ),
        "-o",
        out,
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert doc["hostnames"] == ["hA", "hA", "hB", "hB"]
    assert verdict_hosts(doc) == ["hA", "hB"]  # a verdict per host
    assert {c["rank"] for c in doc["checkpoints"]["records"]} == {0, 1, 2, 3}
    assert all(ep.get("eval") for r in doc["ranks"] for ep in r["epochs"])

    m = doc["metrics"]
    hosts = m["per_host"]
    assert [(h["host"], h["ranks"]) for h in hosts] == [("hA", [0, 1]), ("hB", [2, 3])]
    # the hosts' figures add up to the run's: bytes read, and per epoch bytes and samples/s; the run's bytes/s
    # is all the bytes over the slowest host's window
    assert sum(h["bytes"] for h in hosts) == m["bytes_read"] > 0
    for i in range(len(hosts[0]["epochs"])):
        rows = [h["epochs"][i] for h in hosts]
        assert len({r["epoch"] for r in rows}) == 1 and all(r["bytes"] > 0 for r in rows)
        assert sum(r["samples_per_second"] for r in rows) == pytest.approx(m["samples_per_second"][i], rel=1e-9)
        window = max(r["window_s"] for r in rows)
        assert sum(r["bytes"] for r in rows) / window == pytest.approx(m["bytes_per_second"][i], rel=1e-9)
    assert len(hosts[0]["epochs"]) == 2
    # and the console says them
    assert "host hA (ranks 0,1): AU" in so and "host hB (ranks 2,3): AU" in so, so


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_checkpoint_only(launcher, tmp_path):
    out = tmp_path / "out"
    code, so, se = launch(
        launcher,
        "run",
        "--workload",
        "default",
        *set_args(
            "workflow.train=false",
            "workflow.generate_data=false",
            "workflow.checkpoint=true",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
            "checkpoint.num_checkpoints_write=2",
            "checkpoint.num_checkpoints_read=1",
            "checkpoint.time_between_checkpoints=0",
            "model.model_size=1048576",
        ),
        "-o",
        out,
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    recs = doc["checkpoints"]["records"]
    assert sorted({(r["kind"], r["rank"]) for r in recs}) == [(k, r) for k in ("load", "save") for r in range(4)]
    assert doc["hostnames"] == ["hA", "hA", "hB", "hB"]


KV_CONFIG = TINY_KV_CONFIG


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_kvcache(launcher, tmp_path):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(KV_CONFIG)
    out = tmp_path / "out"
    code, so, se = launch(
        launcher, "run", "--config", cfg, *set_args(f"kvcache.cache_dir={tmp_path / 'cache'}"), "-o", out
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert sorted((r["rank"], r["host"]) for r in doc["records"]) == [(0, "hA"), (1, "hA"), (2, "hB"), (3, "hB")]
    assert doc["aggregate"]["reference"]["rank_count"] == 4
    assert verdict_hosts(doc) == ["hA", "hB"]


MODEL_LOAD = TINY_MODEL_LOAD


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_model_loading(launcher, tmp_path):
    out = tmp_path / "out"
    folder = f"checkpoint.checkpoint_folder={tmp_path / 'model'}"
    code, so, se = launch(launcher, "run", "-w", "load_llama3_8b", "--output", out, *set_args(*MODEL_LOAD, folder))
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert doc["comm_size"] == 4 and len(doc["loads"]) == 2
    assert verdict_hosts(doc) == ["hA", "hB"]


VDB = ("vdb.vectors=4000", "vdb.processes=2", "vdb.batch=3", "vdb.runs=1", "vdb.duration=2", "vdb.search_list=48")


def between(x, values, rel=0.01):
    """x within the values' extremes (rel: a histogram bucket's width, where percentiles come from buckets)."""
    return min(values) * (1 - rel) <= x <= max(values) * (1 + rel)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_vector_search(launcher, tmp_path):
    """Four ranks on two hosts search one index: rank 0 builds it once, each rank its own share of the queries,
    and the one result's totals are every rank's: the hosts' and ranks' queries and bytes add up to them, the
    QPS is all queries over the run's wall (its slowest rank's), the latencies are over every rank's batches."""
    out = tmp_path / "out"
    sets = set_args(*VDB, f"vdb.index_folder={tmp_path / 'idx'}")
    code, so, se = launch(launcher, "run", "-w", "vdb_diskann_1m", *sets, "-o", out)
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert doc["complete"] and "kept" not in doc["build"]  # built once, by rank 0
    (run,) = doc["runs"]
    hosts, ranks = run["per_host"], run["per_rank"]
    assert [(h["host"], h["ranks"]) for h in hosts] == [("hA", [0, 1]), ("hB", [2, 3])]
    assert [(r["rank"], r["host"]) for r in ranks] == [(0, "hA"), (1, "hA"), (2, "hB"), (3, "hB")]
    for key in ("queries", "bytes", "reads"):
        assert all(r[key] > 0 for r in ranks), key  # every rank searched
        assert sum(h[key] for h in hosts) == sum(r[key] for r in ranks) == run[key], key
    for h in hosts:  # a host's are its ranks'
        assert h["queries"] == sum(r["queries"] for r in ranks if r["host"] == h["host"])
    wall = max(r["seconds"] for r in ranks)
    assert run["seconds"] == pytest.approx(wall, rel=1e-9) and wall >= 2.0  # the same duration on every rank
    assert run["throughput_qps"] == pytest.approx(run["queries"] / wall, rel=1e-9)
    assert run["total_queries"] == run["queries"]
    # each query is given its batch's time / 3 (vdbbench's): the run's mean is the query-weighted mean of the ranks'
    weighted = sum(r["mean_latency_ms"] * r["queries"] for r in ranks) / run["queries"]
    assert run["mean_latency_ms"] == pytest.approx(weighted, rel=1e-9)
    for key in ("p95_latency_ms", "p99_latency_ms", "p999_latency_ms", "query_completion_p99_ms"):
        assert between(run[key], [r[key] for r in ranks]), key
    assert run["min_latency_ms"] == pytest.approx(min(r["min_latency_ms"] for r in ranks))
    assert run["max_latency_ms"] == pytest.approx(max(r["max_latency_ms"] for r in ranks))
    assert sorted(h["host"] for h in hosts if h["verdict"].get("verdict")) == ["hA", "hB"]  # a verdict per host
    summary = load(out / "summary.json")
    assert summary["total_queries"] == run["queries"] and "recall" in summary  # null: no neighbours returned
    assert "host hA (ranks 0,1):" in so and "host hB (ranks 2,3):" in so and "verdict [hB]:" in so, so
    # the report (every format reads the same rows) shows the hosts and their verdicts
    p = subprocess.run(dlio_argv("report", out), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "run 1 [hA]" in p.stdout and "run 1 [hB]" in p.stdout
    assert f"hA: {hosts[0]['throughput_qps']:.1f} QPS" in p.stdout, p.stdout


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_vector_search_keeps_the_index_and_deals_a_query_budget(launcher, tmp_path):
    """A second run on the same index keeps it (rank 0 validates it, nobody rebuilds), and vdb.queries is the
    run's total: dealt to the four ranks, 10 each of 40."""
    sets = set_args(*VDB, f"vdb.index_folder={tmp_path / 'idx'}")
    code, _, se = launch(launcher, "-q", "run", "-w", "vdb_diskann_1m", *sets, "-o", tmp_path / "first")
    assert code == 0, se
    queries = set_args("vdb.queries=40", "vdb.duration=0")
    code, _, se = launch(launcher, "-q", "run", "-w", "vdb_diskann_1m", *sets, *queries, "-o", tmp_path / "out")
    assert code == 0, se
    doc = load(tmp_path / "out" / "dlio-fast.json")
    assert doc["build"] == {"phase": "build", "kept": True}
    (run,) = doc["runs"]
    assert [r["queries"] for r in run["per_rank"]] == [10, 10, 10, 10] and run["queries"] == 40


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_host_that_cannot_start_is_one_line(launcher):
    cmd = launcher_command(launcher, ["hA", "hX"], 1, ["hostname"])
    p = subprocess.run(cmd, env=run_env(SIMHOST_HOSTS="hA hB"), capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    said = [line for line in p.stderr.splitlines() if line.startswith("simhost-agent:")]
    assert said == ["simhost-agent: no host 'hX' here (SIMHOST_HOSTS: hA hB)"], p.stderr[-2000:]
