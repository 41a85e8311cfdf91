"""Kafka's topic-name rule and the partition directories built from names: a name can never make
the broker create, or delete, anything outside its log dir."""

import pytest

from protocol.topic_names import InvalidTopic, is_valid_topic_name, validate_topic_name
from storage.config import LogConfig
from storage.errors import UnsafeLogPath
from storage.log_manager import LogManager, partition_dir

LEGAL = ["t", "a.b_c-D9", "..x", "x" * 249, "-", "__consumer_offsets"]
ILLEGAL = ["", ".", "..", "a/b", "/abs", "../x", "x" * 250, "a b", "ü", "a\x00b", None, 7]


@pytest.mark.parametrize("name", LEGAL)
def test_legal_names(name):
    assert is_valid_topic_name(name) and validate_topic_name(name) == name


@pytest.mark.parametrize("name", ILLEGAL)
def test_illegal_names_are_invalid_topic_exception(name):
    assert not is_valid_topic_name(name)
    with pytest.raises(InvalidTopic) as e:
        validate_topic_name(name)
    assert e.value.error_code == 17


def test_partition_directories_stay_inside_their_log_dir(tmp_path):
    assert partition_dir(tmp_path, ("..x", 3)) == tmp_path / "..x-3"
    with pytest.raises(InvalidTopic):
        partition_dir(tmp_path, (str(tmp_path / "elsewhere"), 0))
    with pytest.raises(UnsafeLogPath):
        partition_dir(tmp_path, ("t", -1))


def test_a_log_whose_directory_is_not_its_own_is_never_deleted(tmp_path):
    manager = LogManager([tmp_path / "logs"], LogConfig())
    manager.startup()
    lg = manager.get_or_create_log(("t", 0))
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "keep.txt").write_text("mine")
    lg.dir = tmp_path / "precious"  # however it got there, deletion refuses it
    with pytest.raises(UnsafeLogPath):
        manager.delete_log(("t", 0))
    assert (tmp_path / "precious" / "keep.txt").read_text() == "mine" and ("t", 0) in manager.logs
    with pytest.raises(InvalidTopic):
        manager.get_or_create_log(("../escape", 0))
    assert not (tmp_path / "escape-0").exists()
    manager.shutdown()
