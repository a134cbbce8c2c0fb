"""MLPerf Storage presets against the source figures (field review section 2), the rules registry, and
the dataset-size rule (Rules 3.1.2) against worked examples computed here by hand."""

import pytest

from dlio.base.errors import DlioError
from dlio.config import load_config
from dlio.mlperf import datasize, rules

GiB = 1 << 30


def ceil_div(a, b):
    return -(-a // b)


# (workload, format, record bytes, stdev, batch, compute s, read threads, epochs or None, files or None, au)
SOURCE = [
    ("unet3d_b200", "npz", 146600628, 68341808, 7, 0.162, 4, None, None, 0.90),
    ("retinanet_b200", "jpeg", 322957, 0, 24, 0.04755, 8, 8, 1170301, 0.85),
]


@pytest.mark.parametrize("name,fmt,rec,sd,batch,comp,rt,epochs,files,au", SOURCE)
def test_v3_presets_have_the_source_figures(name, fmt, rec, sd, batch, comp, rt, epochs, files, au):
    cfg = load_config(workload=name, env={})
    d = cfg.dataset
    assert (d.format, d.record_length_bytes, d.record_length_bytes_stdev) == (fmt, rec, sd)
    assert (cfg.reader.batch_size, cfg.reader.read_threads) == (batch, rt)
    assert cfg.train.computation_time.mean() == pytest.approx(comp)
    assert cfg.metric.au == pytest.approx(au) and rules.rule(name, "v3.0").au == pytest.approx(au)
    if epochs is not None:
        assert cfg.train.epochs == epochs
    if files is not None:
        assert d.num_files_train == files
    assert not cfg.workflow.checkpoint


def test_b200_compute_is_half_the_h100_and_demands_5_90_gib_per_s():
    h100 = load_config(workload="unet3d_h100", env={}).train.computation_time.mean()
    b200 = load_config(workload="unet3d_b200", env={})
    assert b200.train.computation_time.mean() == pytest.approx(round(h100 / 2, 3))
    # st#692: unet3d on b200 needs 5.90 GiB/s per accelerator (batch x record / compute, at 100 % AU)
    assert 7 * 146600628 / 0.162 / GiB == pytest.approx(5.90, abs=0.005)


@pytest.mark.parametrize("model", ["unet3d", "retinanet"])
def test_mi355_shares_the_dataset_and_says_its_compute_is_not_public(model):
    b, m = load_config(workload=f"{model}_b200", env={}), load_config(workload=f"{model}_mi355", env={})
    assert (m.dataset.format, m.dataset.record_length_bytes, m.metric.au) == (
        b.dataset.format,
        b.dataset.record_length_bytes,
        b.metric.au,
    )
    from dlio.config.workloads import workload_text

    assert "NOT PUBLIC" in workload_text(f"{model}_mi355")
    assert rules.rule(f"{model}_mi355", "v3.0").figures_public is False
    assert "compute not public" in rules.label(f"{model}_mi355")


def test_registry_versions_divisions_and_thresholds():
    assert rules.label("unet3d_b200") == "v3.0 closed"
    assert rules.label("unet3d") == "v3.0 whatif, v2.0 closed"  # alias of unet3d_h100
    assert rules.label("default") == "-"
    assert rules.claimed("retinanet_mi355").au == 0.85
    assert rules.claimed("unet3d_h100") is None  # whatif in v3.0: nothing to refuse
    assert rules.rule("cosmoflow_h100", "v2.0").au == 0.70
    assert {r.model for r in rules.RULES["v3.0"].values() if r.division == "closed"} == {"unet3d", "retinanet"}
    with pytest.raises(DlioError, match="v2.0, v3.0"):
        rules.rule("unet3d", "v9")


def test_datasize_steps_bound_unet3d_8_b200_512g():
    ds = datasize.plan("unet3d_b200", 8, 1, 512 * GiB)
    assert ds.samples_by_steps == 500 * 7 * 8 == 28000
    assert ds.samples_by_memory == ceil_div(512 * GiB * 5, 146600628) == 18751
    assert (ds.samples, ds.files) == (28000, 28000)
    assert ds.bytes_on_disk > 28000 * 146_000_000  # ~146.6 MB per npz file


def test_datasize_memory_bound_retinanet_16_on_2_hosts():
    ds = datasize.plan("retinanet_b200", 16, 2, 256 * GiB)
    assert ds.samples_by_steps == 500 * 24 * 16
    assert ds.samples == ceil_div(2 * 256 * GiB * 5, 322957) == 8511285
    assert ds.files == 8511285


def test_datasize_rounds_files_up_by_samples_per_file():
    ds = datasize.minimum(
        batch=400, accelerators=2, hosts=1, host_memory_bytes=GiB, record_bytes=114660.07, samples_per_file=1251
    )
    by_mem = -(-(GiB * 5 * 100) // 11466007)  # ceil(5 GiB / 114660.07), exact in integers
    assert ds.samples == max(400_000, by_mem) == 400_000
    assert ds.files == ceil_div(400_000, 1251) == 320


def test_datasize_refuses_uneven_hosts():
    with pytest.raises(DlioError, match="Rules 3.3.4"):
        datasize.minimum(7, 3, 2, GiB, 1000.0)


def test_datasize_sums_hosts_of_different_memory():
    """Rules 3.1.2 counts the hosts' memory summed: hosts of 1 and 3 GiB need what two of 2 GiB need."""
    ds = datasize.minimum(batch=1, accelerators=2, hosts=2, host_memory_bytes=[GiB, 3 * GiB], record_bytes=1000.0)
    assert ds.samples_by_memory == ceil_div(4 * GiB * 5, 1000) == 21474837
    assert ds.hosts_memory_bytes == (GiB, 3 * GiB) and ds.memory_bytes == 4 * GiB
    assert ds.samples == datasize.minimum(1, 2, 2, 2 * GiB, 1000.0).samples
    with pytest.raises(DlioError, match=r"memory of 1 host\(s\) for 2 hosts"):
        datasize.minimum(1, 2, 2, [GiB], 1000.0)
