"""dlio_fast.file_order: path: the files listed by full path (one round-robin subfolder after
another, as a job that sorts its paths reads them); the expected order is computed here from the
file names themselves."""

from types import SimpleNamespace

import numpy as np

from dlio.config import parse_time
from dlio.config.load import load_config
from dlio.dataset.spec import dataset_spec, file_paths
from dlio.train.loop import Trainer
from dlio.train.planner import Layout, Settings, epoch_plan

ZERO = parse_time(0)


def _layout(n, bad=None):
    return Layout(nfiles=n, spf=1, file_size=np.full(n, 4096, np.uint64), whole_file=True, bad=bad)


def test_path_order_reads_the_sorted_paths_and_name_order_dlios_listing(tmp_path):
    n = 30
    for order in ("path", "name"):
        sets = [
            f"dataset.data_folder={tmp_path}",
            f"dataset.num_files_train={n}",
            "dataset.num_subfolders_train=3",
            "reader.batch_size=2",
            f"dlio_fast.file_order={order}",
        ]
        cfg = load_config(workload="default", sets=sets, env={})
        st = Trainer(cfg, SimpleNamespace(rank=0, size=1), print).settings("train")
        assert st.path_folders == (3 if order == "path" else 0)
        got = epoch_plan(_layout(n), st, ZERO, 0, 1, 1).samples
        names = file_paths(dataset_spec(cfg), "train")
        want = np.argsort(names) if order == "path" else np.arange(n)
        assert np.array_equal(got, want)


def test_path_order_comes_before_a_shuffle_and_after_files_left_out():
    bad = np.zeros(12, bool)
    bad[[3, 4]] = True
    got = epoch_plan(_layout(12, bad), Settings(batch=2, path_folders=2), ZERO, 0, 1, 1).samples
    assert list(got) == [0, 2, 6, 8, 10, 1, 5, 7, 9, 11]
    sh = epoch_plan(_layout(12, bad), Settings(batch=2, path_folders=2, file_shuffle="seed"), ZERO, 0, 1, 1).samples
    assert sorted(sh) == sorted(got) and list(sh) != list(got)
