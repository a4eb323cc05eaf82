"""Session hooks for tests/ops/test_coverage.py: it runs after every other test, and it learns which test
files this session ran (collected and not deselected), so that it can skip when the session was partial."""
import pytest

import op_test


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # The coverage checks read what the other tests recorded (op_test.CHECKED): they run last. sort is
    # stable, so every other test keeps its order.
    items.sort(key=lambda item: item.path.name == "test_coverage.py" and item.path.parent.name == "ops")


def pytest_deselected(items):
    op_test.SESSION["deselected"].update(str(item.path) for item in items)


def pytest_collection_finish(session):
    op_test.SESSION["ran"].update(str(item.path) for item in session.items)


def pytest_runtest_logreport(report):
    if report.failed:
        op_test.SESSION["failed"].append(report.nodeid)

