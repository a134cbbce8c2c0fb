"""A run that measured nothing says so and is not complete (dlio.jobs.driver.measured_nothing through each
family's Run.nothing_measured): its files are written, marked incomplete with the reason, and the command
exits 1. The old behaviour: a KV run in which no request completed, and a vector-search replay in which
every node read came from the node cache (about 10^6 QPS of CPU), were complete runs with exit 0."""

import json
import os

from conftest import TINY_KV_CONFIG, set_args

VDB_CAPTURE = os.path.join(os.path.dirname(__file__), "..", "data", "vdb", "diskann_n5000_d1536_r32_l64_w4.json")


def _load(path):
    with open(path) as f:
        return json.load(f)


def test_kv_run_with_no_request_completed_is_not_complete(dlio_cmd, tmp_path):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG)
    out = tmp_path / "out"
    code, stdout, err = dlio_cmd(
        "run",
        "--config",
        cfg,
        *set_args(f"kvcache.cache_dir={tmp_path / 'cache'}", "kvcache.duration=0.001"),
        "-o",
        out,
        timeout=120,
    )
    assert code == 1, err
    assert "the run measured nothing: no request completed in any trial" in err and "Traceback" not in err
    doc, summary = _load(out / "dlio-fast.json"), _load(out / "summary.json")
    # the reason is the records' own: no trial of any rank completed a request
    assert doc["records"] and sum(r["result"]["counts"]["requests"] for r in doc["records"]) == 0
    assert doc["complete"] is False and "measured nothing" in doc["reason"]
    assert summary["complete"] is False and "measured nothing" in summary["reason"]


def _vdb_replay(dlio_cmd, tmp_path, out, cache_ratio):
    """The captured vector search replayed on 5,000 vectors, 20 queries, with this share of nodes cached."""
    sets = ["vdb.vectors=5000", "vdb.runs=1", "vdb.queries=20", "vdb.processes=1", f"vdb.cache_ratio={cache_ratio}"]
    sets += [f"vdb.trace={VDB_CAPTURE}", f"vdb.index_folder={tmp_path / 'idx'}"]
    return dlio_cmd("run", "-w", "vdb_diskann_1m", *set_args(*sets), "-o", out, timeout=300)


def test_vdb_replay_served_by_the_node_cache_is_not_complete(dlio_cmd, tmp_path):
    """Every node of the capture in the node cache (vdb.cache_ratio=1): the searches ran, the storage read
    nothing. The QPS is the CPU's, not the storage's: not a complete result."""
    out = tmp_path / "out"
    code, stdout, err = _vdb_replay(dlio_cmd, tmp_path, out, cache_ratio=1)
    assert code == 1, err
    assert "the run measured nothing: no search read the index from storage" in err and "Traceback" not in err
    doc, summary = _load(out / "dlio-fast.json"), _load(out / "summary.json")
    (run,) = doc["runs"]
    assert run["queries"] == 20 and run["iops"] == 0 and run["device_reads_per_search"] == 0  # searched, read nothing
    assert doc["complete"] is False and "vdb.cache_ratio" in doc["reason"]
    assert summary["complete"] is False


def test_vdb_replay_that_reads_the_storage_stays_complete(dlio_cmd, tmp_path):
    """The same replay with no node cache reads the index: complete, exit 0 (the check above is no blanket
    refusal of traces)."""
    out = tmp_path / "out"
    code, stdout, err = _vdb_replay(dlio_cmd, tmp_path, out, cache_ratio=0)
    assert code == 0, err
    doc = _load(out / "dlio-fast.json")
    (run,) = doc["runs"]
    assert run["iops"] > 0 and doc["complete"] is True


def test_io_grid_with_no_io_completed_is_not_complete(dlio_cmd, tmp_path):
    """`io --runtime 1us`: the point ends before its first read completes. The old behaviour: a complete
    grid of a point with 0 ops, exit 0."""
    out = tmp_path / "io.json"
    (tmp_path / "files").mkdir()
    code, stdout, err = dlio_cmd(
        "io", tmp_path / "files", "--file-size", "1m", "--bs", "4k", "--runtime", "1us", "--json", out, timeout=120
    )
    assert code == 1, err
    assert "the run measured nothing: no point completed an I/O" in err and "Traceback" not in err
    doc = _load(out)
    assert [p["ops"] for p in doc["points"]] == [0]  # what the reason says, from the point itself
    assert doc["complete"] is False and "measured nothing" in doc["reason"]


CKPT_ONLY = """\
model: tiny
framework: pytorch
workflow:
  generate_data: false
  train: false
  checkpoint: true
checkpoint:
  checkpoint_folder: {ck}
  model_size: 65536
  num_checkpoints_write: 0
  num_checkpoints_read: 0
"""


def test_checkpoint_only_run_that_saves_and_loads_nothing_is_refused(dlio_cmd, tmp_path):
    # the old behaviour: exit 0 with a result of no checkpoint at all
    cfg = tmp_path / "ck.yaml"
    cfg.write_text(CKPT_ONLY.format(ck=tmp_path / "ck"))
    code, _, err = dlio_cmd("run", "--config", cfg, "-o", tmp_path / "out", timeout=60)
    assert code != 0 and "Traceback" not in err
    assert "checkpoint.num_checkpoints_write" in err and "at least one checkpoint" in err
    assert not (tmp_path / "out" / "dlio-fast.json").exists()


TRAIN = """\
framework: pytorch
workflow: {{generate_data: true, train: true}}
dataset: {{data_folder: {data}, format: npz, num_files_train: 8, num_samples_per_file: 1, record_length_bytes: 4096}}
reader: {{batch_size: 2, read_threads: 1}}
train: {{epochs: 1, computation_time: 0.001}}
"""


def _emptied_dataset(dlio_cmd, tmp_path, emptied):
    """A generated 8-file dataset with the first `emptied` files truncated to 0 bytes (bad files)."""
    cfg = tmp_path / "t.yaml"
    cfg.write_text(TRAIN.format(data=tmp_path / "data"))
    code, _, err = dlio_cmd("run", "--config", cfg, "-o", tmp_path / "gen", timeout=300)
    assert code == 0, err
    files = sorted(p for p in (tmp_path / "data" / "train").rglob("*.npz"))
    assert len(files) == 8
    for p in files[:emptied]:
        os.truncate(p, 0)
    return cfg


def test_training_over_files_that_are_all_bad_is_refused(dlio_cmd, tmp_path):
    """--skip-bad-files over a dataset whose every file is bad left steps that read nothing: the compute
    timed alone, reported as a training result. Refused before anything is measured."""
    cfg = _emptied_dataset(dlio_cmd, tmp_path, emptied=8)
    out = tmp_path / "out"
    sets = set_args("workflow.generate_data=false")
    code, _, err = dlio_cmd("run", "--config", cfg, *sets, "--skip-bad-files", "-o", out, timeout=300)
    assert code == 2 and "Traceback" not in err, err
    assert "every one of the 8 train files is bad" in err and "nothing left to read" in err
    assert not (out / "dlio-fast.json").exists()


def test_training_with_some_bad_files_skipped_is_a_result(dlio_cmd, tmp_path):
    cfg = _emptied_dataset(dlio_cmd, tmp_path, emptied=3)
    out = tmp_path / "out"
    sets = set_args("workflow.generate_data=false")
    code, _, err = dlio_cmd("run", "--config", cfg, *sets, "--skip-bad-files", "-o", out, timeout=300)
    assert code == 0, err
    doc = _load(out / "dlio-fast.json")
    (ep,) = doc["ranks"][0]["epochs"]
    assert doc["complete"] is not False and ep["bytes"] > 0
    assert len(doc["ranks"][0]["bad_files"]) == 3
