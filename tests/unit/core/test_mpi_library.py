"""dlio.system.mpi under a launcher whose MPI is not the one mpi4py would load: Open MPI's mpirun starting an
mpi4py that brings the mpich wheel (MLPerf Storage's `mpirun -n N -host H:N`), and any launcher whose
processes each come up as a job of one."""

import pytest

from dlio.base.errors import DlioError
from dlio.system import mpi

OMPI = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "PMIX_RANK": "0"}


def test_world_size_must_be_the_launchers():
    mpi.check_world_size(2, dict(OMPI))
    mpi.check_world_size(1, {})  # no launcher: nothing to compare
    with pytest.raises(DlioError) as e:
        mpi.check_world_size(1, dict(OMPI))
    msg = str(e.value)
    assert "started 2 processes (OMPI_COMM_WORLD_SIZE) but MPI sees 1" in msg and "\n" not in msg
    with pytest.raises(DlioError, match=r"started 4 processes \(PMI_SIZE\)"):
        mpi.check_world_size(1, {"PMI_SIZE": "4", "PMI_RANK": "0"})


@pytest.mark.skipif(not mpi._mpi4py_has_abi("openmpi"), reason="mpi4py here is not a wheel with an Open MPI ABI")
def test_open_mpi_launcher_gets_open_mpis_library(monkeypatch):
    env = dict(OMPI)
    lib = mpi._openmpi_library(env)
    if lib is None:
        pytest.skip("no Open MPI library (libmpi.so.40) on this host (apt-get install libopenmpi3)")
    mpi.choose_library(env)
    assert env["MPI4PY_LIBMPI"] == lib and mpi._is_openmpi(lib)
    chosen = dict(OMPI, MPI4PY_LIBMPI="/x/libmpi.so")  # the user's choice is kept
    mpi.choose_library(chosen)
    assert chosen["MPI4PY_LIBMPI"] == "/x/libmpi.so"
    plain = {"PMI_SIZE": "2"}  # MPICH's launcher: mpi4py's own choice (the wheel's MPICH)
    mpi.choose_library(plain)
    assert "MPI4PY_LIBMPI" not in plain


@pytest.mark.skipif(not mpi._mpi4py_has_abi("openmpi"), reason="mpi4py here is not a wheel with an Open MPI ABI")
def test_open_mpi_launcher_without_its_library_says_what_to_do(monkeypatch):
    monkeypatch.setattr(mpi, "_openmpi_library", lambda env: None)
    with pytest.raises(DlioError) as e:
        mpi.choose_library(dict(OMPI))
    msg = str(e.value)
    assert "libopenmpi3" in msg and "mpiexec" in msg and "\n" not in msg


def test_agree_returns_rank_0s_answer_and_raises_its_problem_as_one_line():
    """Comm.agree: rank 0's check, its answer returned, a DlioError re-raised as it was, an OSError as a
    DlioError naming the file (what every rank then raises)."""
    from dlio.base.errors import ConfigError, DlioError
    from dlio.system.mpi import Comm

    comm = Comm()
    assert comm.agree(lambda: 42) == 42

    def refused():
        raise ConfigError("kvcache.users = 0: give at least one user", "kvcache.users", 0)

    with pytest.raises(ConfigError, match="kvcache.users"):
        comm.agree(refused)
    with pytest.raises(DlioError, match="/no/such/folder"):
        comm.agree(lambda: open("/no/such/folder/x"))
    with pytest.raises(DlioError, match="first"):
        comm.agree_all(lambda: (_ for _ in ()).throw(DlioError("first")))
