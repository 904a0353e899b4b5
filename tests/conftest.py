import pytest

from ps_cluster import Processes


@pytest.fixture
def processes(tmp_path):
    """Starts cluster processes (ps_cluster.Processes); every one still running is killed at the
    end, pass or fail."""
    procs = Processes(tmp_path)
    yield procs
    procs.kill_all()
