"""The console's pure parts (issue 38): snapshots merged into the cluster's view, pages that
escape everything a client can name, bytes shown safely, and HTTP Basic logins checked as the
SASL listeners check them."""

import base64

from console import pages
from console.auth import ANONYMOUS, ConsoleAuth
from console.view import ClusterView
from security.credentials import CredentialCache
from security.scram import make_credential


def _snapshot(broker_id, replicas, groups=(), transactions=()):
    return {
        "broker_id": broker_id,
        "controller_id": 1,
        "controller_epoch": 4 if broker_id == 1 else 3,
        "active_controller": broker_id == 1,
        "brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b, "rack": None} for b in (1, 2)],
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 2,
                "replicas": [1, 2],
                "isr": [1],
                "offline": [],
            }
        ],
        "replicas": replicas,
        "groups": list(groups),
        "transactions": list(transactions),
    }


LEADER = {
    "topic": "t", "partition": 0, "leader": True, "leader_epoch": 2, "leo": 10, "hw": 8, "log_start": 2,
    "followers": {"2": {"leo": 8, "log_start": 2, "caught_up_ms_ago": 12000}},
}  # fmt: skip
FOLLOWER = {
    "topic": "t",
    "partition": 0,
    "leader": False,
    "leader_epoch": 2,
    "leo": 8,
    "hw": 7,
    "log_start": 2,
    "followers": {},
}
EVIL = "<script>alert(1)</script>"
GROUP = {
    "group_id": EVIL, "type": "classic", "state": "Stable", "protocol": "range",
    "members": [{"member_id": "m-1", "client_id": EVIL, "host": "/10.0.0.1", "assignment": {"t": [0]}}],
    "committed": [["t", 0, 5]],
}  # fmt: skip


def _view():
    return ClusterView(1, {1: _snapshot(1, [LEADER], [GROUP]), 2: _snapshot(2, [FOLLOWER])})


def test_the_view_takes_each_replica_from_its_own_broker_and_lag_from_the_leaders_hw():
    view = _view()
    assert view.controller_epoch == 4
    assert view.replica("t", 0, 2)["hw"] == 7 and view.follower_as_leader_sees_it("t", 0, 2)["leo"] == 8
    assert [p["partition"] for p in view.under_replicated()] == [0] and view.offline() == []
    [group] = view.groups()
    assert group["coordinator"] == 1 and group["lag"] == {("t", 0): 3}


def test_the_topic_page_shows_every_replica_and_an_isr_shrink():
    html = pages.topic(_view(), "t")
    assert "<b>1</b> (leader): LEO 10, HW 8, log start 2" in html
    assert "<b>2</b> (OUT OF ISR): LEO 8, HW 7, log start 2; leader sees LEO 8, caught up 12000 ms ago" in html
    assert 'class="warn"' in html and 'href="/records/t/0"' in html


def test_a_broker_that_does_not_answer_is_named_and_its_replicas_are_unknown():
    view = ClusterView(1, {1: _snapshot(1, [LEADER])}, {2: "no answer in 2 s"})
    html = pages.topic(view, "t")
    assert "Not answering: broker 2 (no answer in 2 s)" in html
    assert "<b>2</b> (OUT OF ISR): unknown (broker not answering)" in html


def test_names_clients_choose_are_escaped_everywhere():
    view = _view()
    for html in (pages.groups(view), pages.group(view, EVIL)):
        assert EVIL not in html and "&lt;script&gt;" in html
    assert "<td>5</td><td>8</td><td>3</td>" in pages.group(view, EVIL)


def test_bytes_are_text_only_when_printable_utf8():
    assert pages.show_bytes(None) == '<span class="muted">null</span>'
    assert pages.show_bytes("héllo\n".encode().hex()) == "héllo\n"
    assert pages.show_bytes(EVIL.encode().hex()) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    binary = pages.show_bytes(bytes([0, 255, 7]).hex())
    assert "00 ff 07" in binary and "(3 bytes, binary)" in binary
    assert "(2 bytes, binary)" in pages.show_bytes(b"\xc3\x28".hex())  # invalid UTF-8
    assert pages.show_bytes(("x" * 300).encode().hex()).endswith("...")


def _basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_logins_are_checked_as_the_sasl_listeners_check_them():
    credentials = CredentialCache()
    credentials.update_user("alice", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "alice-pw", 4096).to_text()})
    auth = ConsoleAuth("basic", {"broker": "broker-pw"}, credentials)
    assert auth.principal(_basic("broker", "broker-pw")) == "User:broker"
    assert auth.principal(_basic("alice", "alice-pw")) == "User:alice"
    for header in (None, _basic("alice", "wrong"), _basic("bob", "x"), "Basic !!!", "Bearer abc", _basic("", "")):
        assert auth.principal(header) is None
    assert ConsoleAuth("open", {}).principal(None) == ANONYMOUS


def test_a_certificate_cluster_takes_the_principal_from_the_client_certificate():
    auth = ConsoleAuth("certificate", {"broker": "broker-pw"})
    cert = {"subject": ((("organizationName", "minikafka"),), (("commonName", "admin"),))}
    assert auth.principal(None, cert) == "User:CN=admin,O=minikafka"
    assert auth.principal(_basic("broker", "broker-pw"), None) is None  # a password is not a certificate
