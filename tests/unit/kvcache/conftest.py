import pytest


@pytest.fixture(autouse=True)
def _measured_phase():
    """Each test runs the engine as a measured phase does (dlio.execute.stop_signals_deferred): a stop
    signal noted by an earlier test of the session is not this test's."""
    from dlio.execute import stop_signals_deferred

    with stop_signals_deferred():
        yield
