"""What the spec fuzzer (`fuzz/runner.py`) counts as a finding in the broker's log: a handler's
traceback or an ERROR record, never an INFO line about the broker's surroundings."""

from fuzz.runner import failure_in

HANDLER_FAILED = (
    "2026-11-28 07:59:49,233 ERROR [broker 1] broker.server: API 37 v3 from 127.0.0.1:4000 failed\n"
    "Traceback (most recent call last):\n"
    '  File "broker/handlers/admin.py", line 1, in create_partitions\n'
    "KeyError: 'count'\n"
)


def test_a_handler_traceback_is_a_finding():
    assert failure_in(HANDLER_FAILED) == "KeyError: 'count'"


def test_an_error_record_without_traceback_is_a_finding():
    said = "2026-11-28 07:59:49,233 ERROR [broker 1] storage.log_manager: log dir /d is offline (1 partitions)\n"
    assert failure_in(said) == said.rstrip("\n")


def test_the_no_error_response_line_is_a_finding():
    said = "2026-11-28 07:59:49,233 WARNING [broker 1] broker.server: closing p: no error response for API 3 v12\n"
    assert failure_in(said) is not None


def test_info_lines_about_the_cluster_are_not_findings():
    said = (
        "2026-11-28 07:59:49,233 WARNING [broker 1] broker.zk_session: ZooKeeper session expired (1 since start-up)\n"
        "2026-11-28 07:59:49,233 INFO [broker 1] controller.controller: controller: brokers [1] failed\n"
    )
    assert failure_in(said) is None
    assert failure_in("") is None
