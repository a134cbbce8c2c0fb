"""Run several tiny DLIO workloads in ONE python process of a DLIO venv (a DLIO start costs 20-40 s of
imports on this machine), as DLIO's own tests/dlio_benchmark_test.py does: DLIOBenchmark on a workload,
ConfigArguments.reset() between runs. Runs with DLIO's python, never dlio-fast's:

    DLIO_PYTHON tests/dlio_driver.py JOBS.json RESULTS.json

JOBS.json: a list of DLIO workload sections (output.folder set in each). RESULTS.json, rewritten after
every job: per job {"ok": bool, "error": text}.
"""

import json
import sys
import traceback


def _run(workload):
    from dlio_benchmark.main import DLIOBenchmark
    from dlio_benchmark.utils.config import ConfigArguments
    from omegaconf import OmegaConf

    ConfigArguments.reset()
    bench = DLIOBenchmark(OmegaConf.create(workload))
    bench.initialize()
    bench.run()
    bench.finalize()


def main():
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    from dlio_benchmark.utils.utility import DLIOMPI

    DLIOMPI.get_instance().initialize()
    results = []
    for workload in jobs:
        try:
            _run(workload)
            results.append({"ok": True, "error": ""})
        except BaseException as e:  # noqa: BLE001 - one job's failure is that job's result, reported
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"})
        with open(sys.argv[2], "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
