"""Where ZooKeeper's jars are found (issue 49: the plugin outside this repository)."""

import pytest

from local_cluster import zookeeper as z


def test_zookeeper_home_wins_with_its_lib_jars(tmp_path):
    (tmp_path / "lib").mkdir()
    for name in ("zookeeper-3.8.4.jar", "zookeeper-jute-3.8.4.jar", "logback-classic-1.2.13.jar"):
        (tmp_path / "lib" / name).write_bytes(b"")
    jars = z.classpath({"ZOOKEEPER_HOME": str(tmp_path)})
    assert [p.rsplit("/", 1)[1] for p in jars] == [
        "logback-classic-1.2.13.jar",
        "zookeeper-3.8.4.jar",
        "zookeeper-jute-3.8.4.jar",
    ]


def test_a_zookeeper_home_without_zookeeper_says_what_to_install(tmp_path):
    with pytest.raises(z.ZooKeeperError, match=r"ZOOKEEPER_HOME=.* holds no zookeeper jar.*apt install zookeeper"):
        z.classpath({"ZOOKEEPER_HOME": str(tmp_path)})


def test_debian_then_homebrew_then_a_message_naming_every_way(tmp_path, monkeypatch):
    monkeypatch.setattr(z, "DEBIAN_CLASSPATH", [str(tmp_path / "missing.jar")])
    brew = tmp_path / "brew" / "lib"
    brew.mkdir(parents=True)
    monkeypatch.setattr(z, "HOMEBREW_LIBS", [str(tmp_path / "nowhere"), str(brew)])
    with pytest.raises(z.ZooKeeperError) as e:
        z.classpath({})
    for hint in ("apt install zookeeper", "brew install zookeeper", "ZOOKEEPER_HOME", "--kafka-zookeeper"):
        assert hint in str(e.value)
    (brew / "zookeeper-3.9.2.jar").write_bytes(b"")
    assert z.classpath({}) == [str(brew / "zookeeper-3.9.2.jar")]
    debian = tmp_path / "zookeeper.jar"
    debian.write_bytes(b"")
    monkeypatch.setattr(z, "DEBIAN_CLASSPATH", [str(debian)])
    assert z.classpath({}) == [str(debian)]


def test_no_java_says_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(z.shutil, "which", lambda name: None)
    with pytest.raises(z.ZooKeeperError, match="default-jre-headless"):
        z.java_command()


@pytest.mark.parametrize("security", ["ssl", "sasl_plaintext", "sasl_ssl"])
def test_a_secured_cluster_refuses_a_running_zookeeper_it_would_have_to_log_in_to(security):
    from minikafka.testing import KafkaCluster

    with pytest.raises(ValueError, match=f"security={security} needs a ZooKeeper of its own"):
        KafkaCluster(security=security, zookeeper="127.0.0.1:2181")
    assert KafkaCluster(zookeeper="127.0.0.1:2181").external_zookeeper.startswith("127.0.0.1:2181/minikafka-")
