"""Every error says where and what to do: mistyped options, broken files of another tool, O_DIRECT
sizes the device cannot take, a complete dataset on a read-only mount, OSErrors with their path."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import one_line, set_args

OPTS = [
    "--workload",
    "default",
    *set_args("train.epochs=1", "train.computation_time=0", "workflow.evaluation=false"),
]


def dlio(*args):
    p = subprocess.run([sys.executable, "-m", "dlio", *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize(
    "cmd, word, needle",
    [
        ("run", "--dryrun", "did you mean --dry-run?"),
        ("run", "--engin", "did you mean --engine?"),
        ("run", "--epochs", "--set train.epochs=VALUE"),
        ("run", "--batch-size", "--set reader.batch_size=VALUE"),
        ("generate", "--dryrun", "did you mean --dry-run?"),
        ("generate", "--thread", "did you mean --threads?"),
        ("verify", "--threads", "unknown option --threads"),
        ("run", "-x", "unknown option -x"),
    ],
)
def test_a_mistyped_option_is_an_unknown_option_with_the_nearest(run_cli, tmp_path, cmd, word, needle):
    code, out, err = run_cli(cmd, "--workload", "default", word, "3", "--set", f"dataset.data_folder={tmp_path}/d")
    assert code == 2
    line = one_line(err)
    assert needle in line and f"dlio-fast {cmd} --help" in line and "++workload" not in line
    assert not (tmp_path / "d").exists()


def test_dlio_overrides_still_work(run_cli, tmp_path):
    code, out, err = run_cli(
        "run", "--workload", "default", "++workload.train.epochs=1", "--dry-run", "-o", tmp_path / "o"
    )
    assert code == 0, err


@pytest.fixture(scope="module")
def tfdata(tmp_path_factory):
    d = tmp_path_factory.mktemp("tf") / "d"
    code, _, err = dlio(
        "generate",
        *OPTS,
        *set_args("dataset.format=tfrecord", "dataset.num_samples_per_file=4", f"dataset.data_folder={d}"),
    )
    assert code == 0, err
    return d


@pytest.mark.parametrize(
    "damage, needle",
    [
        ("idx-odd", "cannot reshape"),
        ("idx-text", "invalid literal"),
        ("no-idx-garbage", "holds 0 sample(s)"),
        ("idx-short", "holds 1 sample(s)"),
    ],
)
def test_broken_files_of_another_tool_are_named(run_cli, tmp_path, tfdata, damage, needle):
    d = tmp_path / "d"
    shutil.copytree(tfdata, d)
    shutil.rmtree(d / ".dlio-fast")  # made by another tool: no manifest, a scan reads the files
    victim = d / "train" / "1" / "img_61_of_64.tfrecord"
    idx = d / "index" / "train" / "img_61_of_64.tfrecord.idx"
    if damage == "idx-odd":
        idx.write_text("1 2 3\n")
    elif damage == "idx-text":
        idx.write_text("x y\n")
    elif damage == "idx-short":
        idx.write_text(idx.read_text().splitlines()[0] + "\n")
    else:
        idx.unlink()
        victim.write_bytes(b"garbage\n")
    code, out, err = run_cli(
        "run",
        *OPTS,
        *set_args("dataset.format=tfrecord", "dataset.num_samples_per_file=4", f"dataset.data_folder={d}"),
        "-o",
        tmp_path / "o",
    )
    assert code == 2
    line = one_line(err)
    assert str(victim) in line and needle in line


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--direct", "--bs", "1000", "--rw", "write"], "--bs 1000"),
        (["--direct", "--bs", "1000", "--rw", "read"], "--bs 1000"),
        (["--direct", "--bs", "4k,1000"], "--bs 1000"),
        (["--direct", "--bs", "4k", "--file-size", "1000000"], "--file-size 1000000"),
    ],
)
def test_direct_sizes_the_device_cannot_take_are_refused_before_the_run(run_cli, tmp_path, args, needle):
    from dlio.fsbench.points import direct_supported

    if not direct_supported(str(tmp_path)):
        pytest.skip("this filesystem refuses O_DIRECT")
    code, out, err = run_cli("io", tmp_path, *args, "--runtime", "100ms")
    assert code == 2
    line = one_line(err)
    assert needle in line and "multiple" in line and "--buffered" in line
    assert not os.listdir(tmp_path)


@pytest.fixture
def ro_mount(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.mark.parametrize("fmt", ["npz", "tfrecord"])
@pytest.mark.parametrize("manifest", [True, False])
def test_generate_of_a_complete_dataset_on_a_read_only_mount_is_a_no_op(ro_mount, fmt, manifest):
    d = ro_mount / "d"
    code, _, err = dlio("generate", *OPTS, "--set", f"dataset.format={fmt}", "--set", f"dataset.data_folder={d}")
    assert code == 0, err
    if not manifest:
        shutil.rmtree(d / ".dlio-fast")
    assert subprocess.run(["mount", "-o", "remount,ro", str(ro_mount)]).returncode == 0
    code, out, err = dlio("generate", *OPTS, "--set", f"dataset.format={fmt}", "--set", f"dataset.data_folder={d}")
    assert code == 0, err
    assert "72 files already complete" in out
    code, out, err = dlio(
        "generate",
        *OPTS,
        *set_args(f"dataset.format={fmt}", f"dataset.data_folder={d}", "dataset.num_files_train=80"),
    )
    assert code == 2 and "Read-only file system" in one_line(err) and str(d) in err


@pytest.mark.parametrize(
    "make, args, needle",
    [
        ("file", ["generate", *OPTS, "--set", "dataset.data_folder={p}"], "File exists"),
        ("file", ["generate", *OPTS, "--set", "dataset.data_folder={p}/sub"], "Not a directory"),
        (
            "file",
            [
                "run",
                *OPTS,
                *set_args("workflow.checkpoint=true", "checkpoint.checkpoint_folder={p}", "dataset.data_folder={t}/d"),
                "-o",
                "{t}/o",
            ],
            "File exists",
        ),
    ],
)
def test_os_errors_keep_their_path_and_a_hint(run_cli, tmp_path, make, args, needle):
    p = tmp_path / "afile"
    p.write_text("x")
    code, out, err = run_cli(*[a.format(p=p, t=tmp_path) for a in args])
    assert code != 0
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert str(p) in line and needle in line and ";" in line


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "-w", "default", "--set", "dataset.data_folder={loop}/x"],
        ["generate", "-w", "default", "--set", "dataset.data_folder={file}/x"],
        ["run", "-w", "default", "--set", "dataset.data_folder={file}/x", "--output", "{tmp}/o"],
        ["run", "-w", "default", "--set", "dataset.data_folder={tmp}/d", "--output", "{file}/o"],
        ["io", "{loop}"],
        ["io", "{tmp}/missing"],
        ["ceiling", "{file}"],
        ["run", "--config", "{loop}"],
        ["verify", "--data", "{tmp}/missing", "-w", "default"],
    ],
)
def test_a_bad_path_is_bad_input_exit_2(run_cli, tmp_path, args):
    """A path the user gave that is a file where a folder goes, a symbolic-link loop or missing: one line
    naming it, exit status 2 like every other bad input (an OSError used to exit 1)."""
    loop, file = tmp_path / "loop", tmp_path / "a-file"
    loop.symlink_to(loop)
    file.write_text("x")
    code, out, err = run_cli(*[a.format(loop=loop, file=file, tmp=tmp_path) for a in args])
    assert code == 2, err
    line = one_line(err)
    assert str(tmp_path) in line or "loop" in line or "a-file" in line, line
