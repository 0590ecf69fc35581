"""One context for every test of a file, and the device list the tests
are parametrized over: every device it has (CPU and PoCL in CI)."""

import locus
import pytest

_context = locus.Context()
DEVICES = [device.selector for device in _context.devices]


@pytest.fixture(scope="session")
def ctx():
    return _context


def pytest_sessionfinish(session, exitstatus):
    _context.close()
