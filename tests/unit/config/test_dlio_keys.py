"""Keys as DLIO treats them: unknown keys in a file are warnings (DLIO ignores them), on the command line
errors; keys DLIO honours and dlio-fast does not emulate are warnings; `~workload.KEY` deletes any key;
`hydra.run.dir` is the output folder; `workload=NAME` next to a config file."""

import re
import textwrap

import pytest

from dlio.checkpoint.layout import plan_checkpoint
from dlio.config import ConfigError, load_config
from dlio.config.workloads import list_workloads

NOENV = {}
IGNORED = "ignored (DLIO ignores it too)"


def write(tmp_path, text, name="w.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def one_line(excinfo, *needles):
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


DLRM_200 = """\
model: dlrm
framework: pytorch
workflow:
  generate_data: False
  train: True
  do_eval: True
dataset:
  format: indexed_binary
  num_files_train: 1
  record_length: 4096
  eval_num_samples_per_file: 91681240
"""


# ---------------------------------------------------------------------------------------------------
# unknown keys


def test_unknown_key_in_a_file_is_one_warning_line_naming_file_line_key_and_nearest(tmp_path):
    path = write(tmp_path, DLRM_200)
    cfg = load_config(config_file=path, env=NOENV)
    assert cfg.dlio_fast.dialect == "2.0.0" and cfg.dataset.record_length_bytes == 4096
    assert len(cfg.warnings) == 2, cfg.warnings
    do_eval, eval_spf = cfg.warnings
    assert do_eval == (
        f"warning: {path}:6: workflow.do_eval is not a DLIO key: {IGNORED}; nearest valid key: workflow.evaluation"
    )
    assert eval_spf.startswith(f"warning: {path}:11: dataset.eval_num_samples_per_file is not a DLIO key: {IGNORED}")
    assert eval_spf.endswith("nearest valid key: dataset.num_samples_per_file")
    assert all("\n" not in w for w in cfg.warnings)


def test_unknown_section_in_a_file_warns_once_per_leaf(tmp_path):
    cfg = load_config(config_file=write(tmp_path, "datset:\n  format: npz\n  num_files_train: 4\n"), env=NOENV)
    assert [re.search(r": (\S+) is not a DLIO key", w).group(1) for w in cfg.warnings] == [
        "datset.format",
        "datset.num_files_train",
    ]
    assert cfg.warnings[0].endswith("nearest valid key: dataset.format")
    assert cfg.dataset.format == "tfrecord"  # ignored, as DLIO does


def test_unknown_key_under_the_workload_root_key_names_its_line(tmp_path):
    path = write(tmp_path, "workload:\n  dataset:\n    format: npz\n    num_file_train: 3\n")
    cfg = load_config(config_file=path, env=NOENV)
    assert cfg.warnings == (
        f"warning: {path}:4: dataset.num_file_train is not a DLIO key: {IGNORED}; "
        "nearest valid key: dataset.num_files_train",
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"sets": ["workflow.do_eval=true"]},
        {"dlio_overrides": ["++workload.workflow.do_eval=true"]},
        {"dlio_overrides": ["+workload.workflow.do_eval=true"]},
        {"dlio_overrides": ["workload.workflow.do_eval=true"]},
    ],
)
def test_unknown_key_on_the_command_line_is_an_error(kw):
    with pytest.raises(ConfigError) as e:
        load_config("default", env=NOENV, **kw)
    one_line(e, "workflow.do_eval", "unknown key", "did you mean workflow.evaluation?")


def test_a_known_file_is_silent(tmp_path):
    assert load_config(config_file=write(tmp_path, "dataset:\n  format: npz\n"), env=NOENV).warnings == ()
    assert load_config("unet3d", env=NOENV).warnings == ()


def test_the_builtin_workloads_carry_no_unknown_key():
    for name in list_workloads():
        assert not [w for w in load_config(name, env=NOENV).warnings if "is not a DLIO key" in w], name


# ---------------------------------------------------------------------------------------------------
# keys DLIO honours and dlio-fast does not emulate


@pytest.mark.parametrize(
    "text, key, what",
    [
        (
            "reader:\n  data_loader: tensorflow\n  sample_shuffle: seed\n  shuffle_size: 2\n",
            "reader.shuffle_size",
            "shuffle buffer",
        ),
        ("dataset:\n  keep_files: false\n", "dataset.keep_files", "deletes the dataset"),
        ("workflow:\n  profiling: true\n", "workflow.profiling", "iostat"),
        ("workflow:\n  profiling: true\nprofiling:\n  profiler: darshan\n", "workflow.profiling", "darshan"),
        ("output:\n  log_file: run.log\n", "output.log_file", "run.log"),
        ("reader:\n  reader_classname: my.Reader\n", "reader.reader_classname", "plugin"),
        (
            "checkpoint:\n  checkpoint_mechanism_classname: my.Ck\n",
            "checkpoint.checkpoint_mechanism_classname",
            "plugin",
        ),
        ("reader:\n  read_type: memory\n", "reader.read_type", "memory"),
        ("checkpoint:\n  randomize_tensor: false\n  ksm: {}\n", "checkpoint.ksm", "KSM"),
    ],
)
def test_a_key_dlio_honours_and_we_do_not_emulate_is_a_warning(tmp_path, text, key, what):
    path = write(tmp_path, text)
    cfg = load_config(config_file=path, env=NOENV)
    assert len(cfg.warnings) == 1, cfg.warnings
    w = cfg.warnings[0]
    assert w.startswith(f"warning: {path}:") and f" {key}" in w and "not emulated" in w and what in w, w
    assert "\n" not in w


def test_not_emulated_warnings_also_come_from_the_command_line():
    cfg = load_config("default", sets=["dataset.keep_files=false"], env=NOENV)
    assert len(cfg.warnings) == 1 and "--set dataset.keep_files=false" in cfg.warnings[0]


@pytest.mark.parametrize(
    "text",
    [
        "reader:\n  data_loader: pytorch\n  sample_shuffle: seed\n  shuffle_size: 2\n",  # TF and DALI use it
        "reader:\n  data_loader: tensorflow\n  shuffle_size: 2\n",  # ... when they shuffle samples
        "dataset:\n  keep_files: true\n",
        "workflow:\n  profiling: false\nprofiling:\n  profiler: darshan\n",
        "workflow:\n  profiling: true\nprofiling:\n  profiler: none\n",
        "output:\n  log_file: dlio.log\n",
        "checkpoint:\n  type: all_ranks\n",  # current DLIO never reads it
        "reader:\n  read_type: on_demand\n",
    ],
)
def test_what_dlio_ignores_too_or_we_do_as_dlio_gives_no_warning(tmp_path, text):
    assert load_config(config_file=write(tmp_path, text), env=NOENV).warnings == ()


def test_2_0_0_checkpoint_type_rank_zero_is_honoured(tmp_path):
    base = "framework: pytorch\ncheckpoint:\n  model_size: 1000\n  {}\nworkflow:\n  checkpoint: true\n"
    cfg = load_config(config_file=write(tmp_path, base.format("")), env=NOENV)  # 2.0.0's default: rank_zero
    assert cfg.dlio_fast.dialect == "2.0.0" and cfg.checkpoint.type == "rank_zero" and cfg.warnings == ()
    plan = plan_checkpoint(cfg, 1, 4)
    assert plan.writers == (0,) and plan.files == () and plan.total_tensor_bytes == 1000
    cfg = load_config(config_file=write(tmp_path, base.format("type: all_ranks")), env=NOENV)
    assert plan_checkpoint(cfg, 1, 4).writers == (0, 1, 2, 3) and plan_checkpoint(cfg, 1, 4).total_tensor_bytes == 4000
    # current DLIO ignores checkpoint.type: the current layout decides (ZeRO 0: ranks < TP*PP)
    cur = "model:\n  model_size_bytes: 1000\n  parallelism: {{tensor: 2}}\ncheckpoint:\n  type: {}\n"
    for kind in ("rank_zero", "all_ranks"):
        cfg = load_config(config_file=write(tmp_path, cur.format(kind)), env=NOENV)
        assert cfg.dlio_fast.dialect == "current" and plan_checkpoint(cfg, 1, 4).writers == (0, 1)


# ---------------------------------------------------------------------------------------------------
# ~workload.KEY


def test_delete_an_unknown_key_a_file_carried_removes_it_and_its_warning(tmp_path):
    path = write(tmp_path, DLRM_200)
    cfg = load_config(config_file=path, dlio_overrides=["~workload.workflow.do_eval"], env=NOENV)
    assert [w for w in cfg.warnings if "do_eval" in w] == [] and len(cfg.warnings) == 1
    cfg = load_config(config_file=path, dlio_overrides=["~workload.dataset"], env=NOENV)
    assert cfg.warnings[0].startswith(f"warning: {path}:6: workflow.do_eval") and len(cfg.warnings) == 1
    assert cfg.dataset.format == "tfrecord"  # the whole section back to its defaults


def test_delete_a_key_a_lower_layer_set_resets_it_to_its_default(tmp_path):
    path = write(tmp_path, "train:\n  epochs: 7\nreader:\n  read_threads: 5\n")
    cfg = load_config(config_file=path, dlio_overrides=["~workload.train.epochs"], env=NOENV)
    assert cfg.train.epochs == 1 and cfg.reader.read_threads == 5 and cfg.origin("train.epochs") == "default"
    cfg = load_config(config_file=path, dlio_overrides=["~workload.train"], env=NOENV)
    assert cfg.train.epochs == 1


def test_delete_a_known_key_nobody_set_is_accepted():
    # Hydra refuses `~` of a key absent from its composed config; which keys a workload file carries is
    # not what a user sees, and the result (the default) is the same: accepted
    assert (
        load_config("default", dlio_overrides=["~workload.reader.shuffle_size"], env=NOENV).reader.shuffle_size == 1024
    )


def test_delete_an_unknown_key_nobody_set_is_an_error():
    with pytest.raises(ConfigError) as e:
        load_config("default", dlio_overrides=["~workload.workflow.do_evl"], env=NOENV)
    one_line(e, "workflow.do_evl", "nothing to delete", "did you mean")


# ---------------------------------------------------------------------------------------------------
# hydra.run.dir, workload=NAME


def test_hydra_run_dir_on_the_command_line_is_the_output_folder():
    cfg = load_config("default", dlio_overrides=["hydra.run.dir=/tmp/out1"], env=NOENV)
    assert cfg.output.folder == "/tmp/out1" and "hydra.run.dir" in cfg.origin("output.folder")
    cfg = load_config("default", dlio_overrides=["++hydra.run.dir=/tmp/out2"], env=NOENV)
    assert cfg.output.folder == "/tmp/out2"


def test_output_folder_wins_over_hydra_run_dir_as_in_dlio(tmp_path):
    path = write(tmp_path, "output:\n  folder: /tmp/from-file\n")
    cfg = load_config(config_file=path, dlio_overrides=["hydra.run.dir=/tmp/h"], env=NOENV)
    assert cfg.output.folder == "/tmp/from-file"


def test_hydra_run_dir_in_a_config_file(tmp_path):
    path = write(tmp_path, "hydra:\n  run:\n    dir: /tmp/from-hydra\ndataset:\n  format: npz\n")
    cfg = load_config(config_file=path, env=NOENV)
    assert cfg.output.folder == "/tmp/from-hydra" and cfg.warnings == ()
    assert load_config(config_file=path, dlio_overrides=["hydra.run.dir=/tmp/cli"], env=NOENV).output.folder == (
        "/tmp/cli"
    )


def test_hydra_run_dir_interpolation_is_refused():
    with pytest.raises(ConfigError) as e:
        load_config("default", dlio_overrides=["hydra.run.dir=out/${now:%H-%M}"], env=NOENV)
    one_line(e, "hydra.run.dir", "${now:%H-%M}", "plain path")


def test_other_hydra_settings_are_a_warning():
    cfg = load_config("default", dlio_overrides=["hydra.job.chdir=true"], env=NOENV)
    assert len(cfg.warnings) == 1 and "hydra.job.chdir" in cfg.warnings[0] and "not emulated" in cfg.warnings[0]


def test_workload_name_next_to_a_config_file(tmp_path):
    path = write(tmp_path, "dataset:\n  format: npz\n", name="unet3d.yaml")
    cfg = load_config(config_file=path, dlio_overrides=["workload=unet3d"], env=NOENV)
    assert cfg.workload == "unet3d" and cfg.dataset.format == "npz"
    assert cfg.reader.batch_size == 1  # the file alone: the built-in unet3d is not merged under it
    with pytest.raises(ConfigError) as e:
        load_config(config_file=path, dlio_overrides=["workload=bert"], env=NOENV)
    one_line(e, "workload=bert", path, "give one")


def test_workload_option_and_override_agreeing_keep_the_file_over_the_builtin(tmp_path):
    path = write(tmp_path, "dataset:\n  format: npz\n", name="mine.yaml")
    cfg = load_config("unet3d", config_file=path, dlio_overrides=["workload=unet3d"], env=NOENV)
    assert cfg.workload == "unet3d" and cfg.dataset.format == "npz" and cfg.reader.batch_size == 7


def test_a_workload_root_key_next_to_hydra_keeps_both(tmp_path):
    path = write(tmp_path, "workload:\n  dataset:\n    format: npz\nhydra:\n  run:\n    dir: /tmp/hy\n")
    cfg = load_config(config_file=path, env=NOENV)
    assert cfg.dataset.format == "npz" and cfg.output.folder == "/tmp/hy" and cfg.warnings == ()
    assert cfg.origin("output.folder") == f"{path} line 6"


def test_hydra_settings_are_kept_for_the_result_writers():
    # MLPerf Storage's benchmark.sh passes hydra.output_subdir; Config.hydra carries every Hydra setting given
    cfg = load_config(
        "default",
        dlio_overrides=["hydra.run.dir=/tmp/r", "hydra.output_subdir=null", "++hydra.job.name=x", "hydra.job.chdir=1"],
        env=NOENV,
    )
    assert dict(cfg.hydra) == {
        "hydra.run.dir": "/tmp/r",
        "hydra.output_subdir": None,
        "hydra.job.name": "x",
        "hydra.job.chdir": 1,
    }
    # output_subdir is honoured, job.name written into hydra.yaml; chdir is not followed
    assert [w.split(": ")[2] for w in cfg.warnings] == ["hydra.job.chdir"]
