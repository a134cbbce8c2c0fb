"""`dlio_postprocessor`: DLIO's postprocessor command on a run folder (dlio-fast's or DLIO's), its
flags as DLIO's argparse has them; the report is dlio.report.dlio.postprocess's."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from dlio.base.errors import DlioError
from dlio.system import output

PROG = "dlio_postprocessor"


def _bool(text: str) -> bool:
    """DLIO's str2bool."""
    if text.strip().lower() in ("yes", "true", "t", "y", "1"):
        return True
    if text.strip().lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"boolean value expected, not {text!r}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="DLIO PostProcessor (dlio-fast)")
    p.add_argument("-of", "--output-folder", default="./output", help="Folder of the output of a benchmark run.")
    p.add_argument("-hf", "--hydra-folder", default="./.hydra", help="Hydra folder containing configs")
    p.add_argument("-np", "--num-proc", type=int, default=None, help="Ignored, as by DLIO: the *_output.json files.")
    p.add_argument("-e", "--epochs", type=int, default=None, help="Epochs (default: those recorded).")
    p.add_argument("-bs", "--batch-size", type=int, default=None, help="Per worker batch size for training records.")
    p.add_argument("-de", "--do-eval", type=_bool, default=None, help="If evaluations were simulated.")
    p.add_argument("-bse", "--batch-size-eval", type=int, default=None, help="Per worker batch size for evaluation.")
    p.add_argument("-c", "--do-checkpoint", type=_bool, default=None, help="Ignored, as by DLIO's report.")
    p.add_argument("-d", "--debug", type=_bool, default=False, help="Print out more logging")
    p.add_argument("-n", "--name", default="", help="Name of the run")
    return p


def main(argv: Optional[List[str]] = None) -> None:
    """The `dlio_postprocessor` console script: 0, or 1 with one line on stderr."""
    from dlio.report.dlio.postprocess import report

    args = parser().parse_args(argv)
    print("===============Processing DLIO output================")
    print("  Job configuration")
    for key, value in vars(args).items():
        print(f"  {key}: {value}")
    hydra = os.path.normpath(args.hydra_folder)
    try:
        # --num-proc and --do-checkpoint are DLIO's too, and its report does not use them either (the
        # ranks are the {rank}_output.json files)
        a = args
        name, text = report(a.output_folder, hydra, a.name, a.batch_size, a.batch_size_eval, a.epochs, a.do_eval)
        path = os.path.join(args.output_folder, name)
        output.atomic_write_text(path, text)
    except (DlioError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a file cut short or edited by hand
        print(f"{PROG}: error: {args.output_folder}: not a complete DLIO output folder ({e!r})", file=sys.stderr)
        sys.exit(1)
    print(f"Successfully wrote {path}")


if __name__ == "__main__":
    main()
