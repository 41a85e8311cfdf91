"""The client's partition assignors (pure): Kafka's range layout, and cooperative-sticky's rules —
balanced, sticky, and never handing a partition to a new owner in the round its old owner still
holds it; repeated rebalances converge (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from client.assignors import Subscription, cooperative_sticky_assign, range_assign


def test_range_is_kafkas_layout():
    members = {"a": Subscription(["t", "u"]), "b": Subscription(["t"]), "c": Subscription(["t"])}
    plan = range_assign(members, {"t": list(range(7)), "u": [0, 1]})
    assert plan == {"a": {"t": [0, 1, 2], "u": [0, 1]}, "b": {"t": [3, 4]}, "c": {"t": [5, 6]}}


def flat(plan):
    return {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in plan.items()}


def owned_as(assignment):
    out = {}
    for t, p in sorted(assignment):
        out.setdefault(t, []).append(p)
    return out


def test_cooperative_first_round_is_balanced():
    members = {m: Subscription(["t"]) for m in "abc"}
    plan = flat(cooperative_sticky_assign(members, {"t": list(range(12))}))
    assert sorted(len(x) for x in plan.values()) == [4, 4, 4]
    assert set().union(*plan.values()) == {("t", p) for p in range(12)}


def test_a_joining_member_gets_partitions_only_after_their_owners_revoke_them():
    parts = {"t": list(range(12))}
    first = flat(cooperative_sticky_assign({m: Subscription(["t"]) for m in "ab"}, parts))
    members = {m: Subscription(["t"], owned_as(first[m])) for m in "ab"} | {"c": Subscription(["t"])}
    second = flat(cooperative_sticky_assign(members, parts))
    assert second["c"] == set()  # nothing moves in the round it is taken away
    assert second["a"] <= first["a"] and second["b"] <= first["b"]  # sticky: only revocations
    assert len(second["a"]) == len(second["b"]) == 4
    members = {m: Subscription(["t"], owned_as(second[m])) for m in "abc"}
    third = flat(cooperative_sticky_assign(members, parts))
    assert third["a"] == second["a"] and third["b"] == second["b"] and len(third["c"]) == 4


@settings(max_examples=200, deadline=None)
@given(
    partitions=st.integers(0, 30),
    rounds=st.lists(st.sets(st.sampled_from("abcdef"), min_size=1), min_size=1, max_size=6),
)
def test_cooperative_rounds_never_double_assign_and_converge(partitions, rounds):
    parts = {"t": list(range(partitions))}
    owned: dict[str, set] = {}
    for present in rounds:
        owned = {m: owned.get(m, set()) for m in present}
        for _ in range(3):  # the rebalance, then the follow-up one after revocations
            plan = flat(cooperative_sticky_assign({m: Subscription(["t"], owned_as(owned[m])) for m in present}, parts))
            everyone = [tp for x in plan.values() for tp in x]
            assert len(everyone) == len(set(everyone))  # each partition at most once
            for m in present:
                for tp in plan[m]:  # a partition only goes to someone when nobody else holds it
                    assert all(tp not in owned[o] for o in present if o != m)
            owned = plan
        sizes = sorted(len(x) for x in owned.values())
        assert sum(sizes) == partitions and sizes[-1] - sizes[0] <= 1
