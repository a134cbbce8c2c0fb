"""dlio_postprocessor's report on folders DLIO wrote (2.0.0 and current, tests/data/dlio-output): each
phase's figures recomputed here from the folder's files."""

import json
import os
import re
import shutil
from datetime import datetime

import pytest
from test_dlio_interchange import GOLDEN

from dlio.cli import dlio_postprocessor


def _phases(report_text):
    """{(epoch, heading): {row: value}} of a report's Detailed Report."""
    out, epoch, head = {}, None, None
    for line in report_text.split("Detailed Report", 1)[1].splitlines():
        if m := re.match(r"^Epoch (\d+)$", line):
            epoch, head = m.group(1), None
        elif m := re.match(r"^    ((Block|Eval|Checkpoint) \d+)$", line):
            head = m.group(1)
            out[(epoch, head)] = {}
        elif head and (m := re.match(r"^        (.+?:)\s+(\S.*)$", line)):
            out[(epoch, head)][m.group(1)] = m.group(2)
    return out


@pytest.mark.parametrize("case", ["2.0.0-eval-epoch-ckpt", "current-eval-epoch-ckpt", "current-ckpt-steps"])
def test_report_of_dlios_own_folders(case, tmp_path, capsys):
    folder = tmp_path / case
    shutil.copytree(os.path.join(GOLDEN, case), folder)
    dlio_postprocessor.main(["-of", str(folder), "-hf", ".hydra"])
    assert "Successfully wrote" in capsys.readouterr().out
    text = (folder / "DLIO_unet3d_report.txt").read_text()
    stats_name = "per_epoch_stats.json" if case.startswith("2.0.0") else "0_per_epoch_stats.json"
    stats = json.loads((folder / stats_name).read_text())
    out = json.loads((folder / "0_output.json").read_text())
    ranks = len(list(folder.glob("*_output.json")))
    assert re.search(rf"Num Ranks:\s+{ranks}$", text, re.M) and re.search(r"Batch size \(per rank\):\s+2$", text, re.M)
    assert ("Eval batch size:" in text) == ("eval" in case)
    epochs = sorted((k for k in stats if k.isdigit()), key=int)
    want = (
        datetime.fromisoformat(stats[epochs[-1]]["end"]) - datetime.fromisoformat(stats["1"]["start"])
    ).total_seconds()
    assert re.search(rf"^    Duration \(s\):\s+{want:.2f}$", text, re.M)
    phases = _phases(text)
    n_blocks = n_ckpt = 0
    for e in epochs:
        for phase, data in stats[e].items():
            if not isinstance(data, dict):
                continue
            if phase.startswith("block"):
                n_blocks += 1
                row = phases[(e, f"Block {n_blocks}")]
                assert row["Avg loading time / rank (s):"] == f"{sum(out[e]['load'][phase]) / ranks:.2f}"
                assert row["Avg processing time / rank (s):"] == f"{sum(out[e]['proc'][phase]) / ranks:.2f}"
            elif "ckpt" in phase:
                n_ckpt += 1
                row = phases[(e, f"Checkpoint {n_ckpt}")]
                assert "Avg loading time / rank (s):" not in row
            else:
                continue
            assert row["Duration (s):"] == str(data["duration"])
    assert n_blocks and (n_ckpt > 0) == ("ckpt" in case)


def test_missing_files_are_one_line_and_status_1(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        dlio_postprocessor.main(["-of", str(tmp_path)])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlio_postprocessor: error:") and "config.yaml" in err and "\n" not in err
