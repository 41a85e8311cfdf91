"""The broker's log file is rotated by size (issue 15: broker.log grew without bound)."""

import logging

import pytest

from broker.main import configure_logging


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[len(handlers) :]:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_log_file_rotates_and_keeps_the_configured_backups(tmp_path, restore_root_logger):
    path = tmp_path / "broker.log"
    configure_logging(7, path, max_bytes=2000, backups=3)
    log = logging.getLogger("broker.test")
    for i in range(200):
        log.info("line %03d %s", i, "x" * 50)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["broker.log", "broker.log.1", "broker.log.2", "broker.log.3"]
    assert all((tmp_path / f).stat().st_size <= 2000 for f in files)
    assert "[broker 7] broker.test: line 199" in path.read_text()
