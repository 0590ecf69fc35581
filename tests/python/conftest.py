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
    # A file whose every test skipped (test_dlpack_cuda.py without a GPU)
    # is skipped, meson's 77, not passed.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter else {}
    # (pytest says 5, no tests collected, for a skip at module level.)
    if exitstatus in (0, 5) and stats.get("skipped") and not (
            stats.get("passed") or stats.get("failed") or stats.get("error")):
        session.exitstatus = 77
