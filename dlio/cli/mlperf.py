"""MLPerf Storage commands: `dlio-fast datasize` (Rules 3.1.2) and `dlio-fast maxacc` (the largest
accelerator count that keeps AU at or above the workload's threshold)."""
import click

from dlio.errors import DlioError


def _size(text: str, option: str) -> int:
    from dlio.units import parse_size
    try:
        return parse_size(text)
    except ValueError as e:
        raise DlioError(f"{option}: {e}")


@click.command("datasize")
@click.option("--workload", "-w", required=True, help="A built-in workload (dlio-fast workloads).")
@click.option("--accelerators", "-n", type=click.IntRange(1), required=True, help="Simulated accelerators in all.")
@click.option("--hosts", type=click.IntRange(1), default=1, show_default=True, help="Client hosts.")
@click.option("--host-memory", required=True, metavar="SIZE", help="RAM of one client host (512g = 512 GiB).")
@click.option("--data-folder", default="DATA_DIR", help="Data folder in the printed commands.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a key (e.g. reader.batch_size).")
def datasize(workload, accelerators, hosts, host_memory, data_folder, sets):
    """The smallest dataset MLPerf Storage accepts (Rules 3.1.2): max(500 steps x batch x accelerators,
    hosts x RAM x 5 / record length) samples; the files, the bytes, and the commands that make and run it."""
    from dlio.mlperf import datasize as ds_mod
    from dlio.mlperf import rules
    from dlio.units import fmt_bytes
    mem = _size(host_memory, "--host-memory")
    ds = ds_mod.plan(workload, accelerators, hosts, mem, list(sets))
    r = rules.claimed(workload)
    click.echo(f"workload            {workload} ({rules.label(workload)})")
    click.echo(f"system              {accelerators} accelerator(s) on {hosts} host(s) "
               f"({accelerators // hosts} per host), {fmt_bytes(mem)} RAM per host")
    click.echo(f"by steps            {ds.samples_by_steps} samples = {rules.MIN_STEPS} x batch {ds.batch} x "
               f"{accelerators} accelerators")
    click.echo(f"by memory           {ds.samples_by_memory} samples = {hosts} x {mem} B x {rules.RAM_FACTOR} / "
               f"{ds.record_bytes:g} B per record")
    click.echo(f"minimum             {ds.samples} samples = {ds.files} files x {ds.samples_per_file} samples/file")
    click.echo(f"size on disk        {fmt_bytes(ds.bytes_on_disk)} ({ds.bytes_on_disk} B)")
    for cmd in ds_mod.commands(ds, data_folder, r.version if r else None):
        click.echo(cmd)
