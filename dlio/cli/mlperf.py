"""MLPerf Storage commands: `dlio-fast datasize` (Rules 3.1.2) and `dlio-fast maxacc` (the largest
accelerator count that keeps AU at or above the workload's threshold)."""

import json
import os
from typing import List, Optional, Tuple

import click

from dlio import config  # its loader (YAML, numpy) loads at the first load_config: --help stays light
from dlio.base.errors import DlioError
from dlio.base.units import fmt_bytes, fmt_num, parse_duration_ns, parse_size
from dlio.cli.params import examples


def _size(text: str, option: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise DlioError(f"{option}: {e}")


@click.command(
    "datasize",
    epilog=examples(
        "dlio-fast datasize -w unet3d_b200 -n 8 --host-memory 512g",
        "dlio-fast datasize -w retinanet_b200 -n 16 --hosts 2 --host-memory 256g",
        "mpirun --host h1:1,h2:1 -n 2 dlio-fast datasize -w resnet50_h100 -n 16   # each host's own memory",
    ),
)
@click.option("--workload", "-w", required=True, help="A built-in workload (dlio-fast workloads).")
@click.option("--accelerators", "-n", type=click.IntRange(1), required=True, help="Simulated accelerators in all.")
@click.option(
    "--hosts",
    type=click.IntRange(1),
    default=None,
    help="Client hosts (default: the hosts the ranks run on under MPI, else 1).",
)
@click.option(
    "--host-memory",
    default=None,
    metavar="SIZE",
    help="RAM of one client host (512g = 512 GiB); default: each host's own, measured (MemTotal or its control "
    "group's limit, the tighter), on every host when run under mpirun with a rank per host.",
)
@click.option("--data-folder", default="DATA_DIR", help="Data folder in the printed commands.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a key (e.g. reader.batch_size).")
def datasize(
    workload: str,
    accelerators: int,
    hosts: Optional[int],
    host_memory: Optional[str],
    data_folder: str,
    sets: Tuple[str, ...],
) -> None:
    """The smallest dataset MLPerf Storage accepts (Rules 3.1.2): max(500 steps x batch x accelerators,
    the hosts' RAM summed x 5 / record length) samples; the files, the bytes, and the commands that make and run it."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.mlperf import datasize as ds_mod
    from dlio.mlperf import rules

    memory, how = _hosts_memory(host_memory, hosts)
    if memory is None:
        return  # a rank other than 0 under MPI: rank 0 prints
    hosts = len(memory)
    ds = ds_mod.plan(workload, accelerators, hosts, memory, list(sets))
    r = rules.claimed(workload)
    click.echo(f"workload            {workload} ({rules.label(workload)})")
    click.echo(
        f"system              {accelerators} accelerator(s) on {hosts} host(s) "
        f"({accelerators // hosts} per host), {ds_mod.memory_text(ds)}"
    )
    click.echo(f"memory              {how}")
    click.echo(
        f"by steps            {ds.samples_by_steps} samples = {rules.MIN_STEPS} x batch {ds.batch} x "
        f"{accelerators} accelerators"
    )
    click.echo(
        f"by memory           {ds.samples_by_memory} samples = {ds_mod.memory_sum(ds)} x {rules.RAM_FACTOR} / "
        f"{fmt_bytes(ds.record_bytes)} ({fmt_num(ds.record_bytes)} B) per record"
    )
    click.echo(f"minimum             {ds.samples} samples = {ds.files} files x {ds.samples_per_file} samples/file")
    click.echo(f"size on disk        {fmt_bytes(ds.bytes_on_disk)} ({ds.bytes_on_disk:,} B)")
    for cmd in ds_mod.commands(ds, data_folder, r.version if r else None):
        click.echo(cmd)


def _hosts_memory(host_memory: Optional[str], hosts: Optional[int]) -> Tuple[Optional[List[int]], str]:
    """Each host's RAM for datasize and how it was obtained: --host-memory for every host; else measured, on every
    host under an MPI launcher (each host's ranks report its own), on this one alone without. (None, "") on the
    ranks other than 0."""
    from dlio.mlperf import datasize as ds_mod
    from dlio.system import mpi

    if host_memory is not None:
        if host_memory.strip().replace(".", "", 1).isdigit():
            raise DlioError(
                f"--host-memory {host_memory}: give a unit (512g = 512 GiB): a bare number would be "
                "bytes (mlpstorage's --client-host-memory-in-gb takes GB)"
            )
        mem = _size(host_memory, "--host-memory")
        return [mem] * (hosts or 1), f"{fmt_bytes(mem)} per host, given (--host-memory)"
    comm = mpi.world()
    found = ds_mod.measured_hosts(comm)
    if comm.rank != 0:
        return None, ""
    each = ", ".join(f"{h.host} {fmt_bytes(h.bytes)} ({h.source})" for h in found)
    if comm.size > 1:
        if hosts is not None and hosts != len(found):
            raise DlioError(
                f"--hosts {hosts}, but the {comm.size} ranks run on {len(found)} host(s) "
                f"({', '.join(h.host for h in found)}): launch a rank on each of the {hosts} hosts, "
                "or leave --hosts out"
            )
        return [h.bytes for h in found], f"measured on each host by its ranks: {each}"
    n = hosts or 1
    if n == 1:
        return [found[0].bytes], f"measured on this host: {each}"
    return [found[0].bytes] * n, (
        f"measured on this host only ({each}) and taken for each of the {n} hosts: run it under mpirun with a rank "
        "on every host to measure each one, or give --host-memory"
    )


@click.command(
    "maxacc",
    epilog=examples(
        "dlio-fast maxacc -w unet3d_b200 --max 16 --plots",
        "dlio-fast maxacc -w unet3d_h100 --launcher model --model-latency 5ms   # a storage model, known answer",
    ),
)
@click.option("--workload", "-w", "workload_name", help="A built-in workload (dlio-fast workloads).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="A DLIO workload YAML file.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a key (every probe gets it).")
@click.option(
    "--launcher",
    type=click.Choice(["mpiexec", "model"]),
    default="mpiexec",
    show_default=True,
    help="mpiexec: N real ranks per probe; model: one rank on the null engine, a storage whose "
    "per-request time is N x --model-latency (known answer).",
)
@click.option(
    "--model-latency",
    default=None,
    metavar="DURATION",
    help="--launcher model: one request's time with one accelerator (e.g. 800us).",
)
@click.option("--max", "max_n", type=click.IntRange(1), default=64, show_default=True, help="Largest N probed.")
@click.option(
    "--steps",
    type=click.IntRange(3),
    default=30,
    show_default=True,
    help="Training steps per probe (the confirmation run takes twice as many).",
)
@click.option("--repeats", type=click.IntRange(1), default=2, show_default=True, help="Probes at the edge, N and N+1.")
@click.option(
    "--output",
    "-o",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder of the probes' run folders and maxacc.json (default output/maxacc/{workload}).",
)
@click.option("--plots", is_flag=True, help="Write maxacc.png (AU against accelerators).")
def maxacc(
    workload_name: Optional[str],
    config_file: Optional[str],
    sets: Tuple[str, ...],
    launcher: str,
    model_latency: Optional[str],
    max_n: int,
    steps: int,
    repeats: int,
    out_dir: Optional[str],
    plots: bool,
) -> None:
    """The largest number of simulated accelerators whose AU stays at or above the workload's threshold
    (MLPerf Storage v3.0's, else metric.au): bracketing search of short runs reusing one dataset, repeats
    at the edge, a confirmation run at the answer."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.mlperf import maxacc as mx
    from dlio.mlperf import rules

    if not (workload_name or config_file):
        raise DlioError("maxacc needs --workload NAME or --config FILE")
    cfg = config.load_config(workload=workload_name, config_file=config_file, sets=list(sets))
    latency_ns = 0
    if launcher == "model":
        if not model_latency:
            raise DlioError(
                "--launcher model needs --model-latency (one request's time at one accelerator, e.g. 800us)"
            )
        try:
            latency_ns = parse_duration_ns(model_latency)
        except ValueError as e:
            raise DlioError(f"--model-latency: {e}")
    elif model_latency:
        raise DlioError("--model-latency is for --launcher model only")
    r = rules.rule(cfg.workload, "v3.0")
    au = r.au if r is not None and r.au is not None else cfg.metric.au
    threshold = 100.0 * au
    compute = cfg.train.computation_time.mean()
    if compute <= 0:
        raise DlioError("train.computation_time is 0: AU is 0 at any N, there is nothing to search")
    demand = cfg.reader.batch_size * cfg.record_bytes() / compute / 2**30
    name = cfg.workload or os.path.splitext(os.path.basename(config_file or ""))[0]
    out_dir = out_dir or os.path.join("output", "maxacc", name)
    os.makedirs(out_dir, exist_ok=True)
    args = ["--workload", workload_name] if workload_name else ["--config", str(config_file)]
    args += [a for s in sets for a in ("--set", s)]
    click.echo(
        f"maxacc {name}: AU threshold {threshold:g} %, {launcher} probes of {steps} steps, "
        f"each accelerator demands {fmt_num(demand, 4)} GiB/s at 100 % AU (exact)",
        err=True,
    )
    measure = mx.subprocess_measure(launcher, args, out_dir, steps, latency_ns, lambda s: click.echo(s, err=True))
    res = mx.search(measure, threshold, max_n, repeats)
    for line in mx.curve_lines(res, demand):
        click.echo(line)
    conf = [p for p in res.probes if p.kind == "confirm" and p.n == res.answer]
    bound = " (every probe up to --max passed: a lower bound)" if res.limit_hit else ""
    click.echo(
        f"answer: {res.answer} accelerators{bound} on this host, each demanding {fmt_num(demand, 4)} GiB/s "
        f"({fmt_num(res.answer * demand, 4)} GiB/s in all at 100 % AU)"
        + (
            f"; confirmation run AU (exact) {conf[-1].au:.2f} %, {conf[-1].mib_per_s / 1024:.3f} GiB/s measured"
            if conf
            else ""
        )
    )
    if mx.from_memory(res):
        click.echo(
            f"warning: the answer is the page cache's, not the storage's: the probes at {res.answer} accelerators "
            f"were served from memory ({res.answer_verdict()}); use --set dlio_fast.cache=drop, "
            "--set dlio_fast.engine=odirect or a dataset larger than RAM",
            err=True,
        )
    doc = dict(
        res.to_json(),
        workload=name,
        launcher=launcher,
        steps=steps,
        demand_GiB_per_s=demand,
        model_latency_ns=latency_ns or None,
    )
    with open(os.path.join(out_dir, "maxacc.json"), "w") as f:
        json.dump(doc, f, indent=1)
    if plots:
        path = mx.plot(res, os.path.join(out_dir, "maxacc.png"), f"maxacc {name}")
        click.echo(f"plot: {path}" if path else "plot: matplotlib is not installed", err=True)
