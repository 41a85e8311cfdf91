"""The share-partition's runs (broker/share/share_partition.py) against a per-record model of the
same rules, under random operations (hypothesis): the same answers, the same SPSO/SPEO, the same
state and delivery count for every record, and the same persisted state."""

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.share.share_partition import ACCEPT, GAP, REJECT, RELEASE, Batch, RecordState, SharePartition
from protocol.errors import ErrorCode

LIMIT, LOCKS, LOCK_MS = 3, 12, 100


@dataclass
class _Record:
    state: RecordState
    count: int = 0
    member: str | None = None
    deadline: float = 0.0


class Model:
    """One dict entry per record: the rules of KIP-932's share-partition, plainly."""

    def __init__(self, start: int) -> None:
        self.start = self.end = start
        self.records: dict[int, _Record] = {}

    def acquire(self, member, batches, max_records, now):
        out: list[list[int]] = []
        wanted = max_records  # soft: a batch begun is taken whole
        budget = LOCKS - sum(r.state == RecordState.ACQUIRED for r in self.records.values())  # hard
        for b in batches:
            if budget <= 0 or wanted <= 0:
                break
            for o in range(max(b.base_offset, self.start), b.last_offset + 1):
                r = self.records.get(o)
                if b.is_control:
                    if r is None and o >= self.end:
                        self.records[o] = _Record(RecordState.ARCHIVED)
                        self.end = o + 1
                    continue
                if r is None:
                    if o < self.end:
                        continue
                    r = self.records[o] = _Record(RecordState.AVAILABLE)
                    self.end = o + 1
                elif r.state != RecordState.AVAILABLE:
                    continue
                r.state, r.count, r.member, r.deadline = RecordState.ACQUIRED, r.count + 1, member, now + LOCK_MS
                if out and out[-1][1] == o - 1 and out[-1][2] == r.count:
                    out[-1][1] = o
                else:
                    out.append([o, o, r.count])
                budget -= 1
                wanted -= 1
                if budget <= 0:
                    break
        self.advance()
        return [tuple(x) for x in out]

    def can_acknowledge(self, member, first, last, types):
        n = last - first + 1
        if n <= 0 or len(types) not in (1, n):
            return ErrorCode.INVALID_REQUEST
        for o in range(first, last + 1):
            r = self.records.get(o)
            if r is None or r.state != RecordState.ACQUIRED or r.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def acknowledge(self, member, first, last, types):
        error = self.can_acknowledge(member, first, last, types)
        if error != ErrorCode.NONE:
            return error
        for i, o in enumerate(range(first, last + 1)):
            kind, r = types[0] if len(types) == 1 else types[i], self.records[o]
            if kind == ACCEPT:
                self.finish(r, RecordState.ACKNOWLEDGED)
            elif kind == RELEASE:
                self.release(r)
            else:
                self.finish(r, RecordState.ARCHIVED)
        self.advance()
        return ErrorCode.NONE

    def expire(self, now):
        hit = [r for r in self.records.values() if r.state == RecordState.ACQUIRED and r.deadline <= now]
        for r in hit:
            self.release(r)
        self.advance()
        return len(hit)

    def release_member(self, member):
        hit = [r for r in self.records.values() if r.state == RecordState.ACQUIRED and r.member == member]
        for r in hit:
            self.release(r)
        self.advance()
        return len(hit)

    def release(self, r):
        self.finish(r, RecordState.ARCHIVED if r.count >= LIMIT else RecordState.AVAILABLE)

    @staticmethod
    def finish(r, state):
        r.state, r.member, r.deadline = state, None, 0.0

    def advance(self):
        while self.start < self.end:
            r = self.records.get(self.start)
            if r is not None and r.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self.records.pop(self.start, None)
            self.start += 1


def _log(cuts: list[int], controls: set[int], gaps: set[int]) -> list[Batch]:
    """Batches over offsets 0..39 cut at `cuts`; some are control batches, some compacted away."""
    bounds = sorted({0, 40, *cuts})
    out = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if i not in gaps:
            out.append(Batch(a, b - 1, i in controls))
    return out


MEMBERS = st.sampled_from(["a", "b", "c"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), MEMBERS, st.integers(1, 15)),
        st.tuples(
            st.just("ack"),
            MEMBERS,
            st.integers(0, 40),
            st.integers(1, 6),
            st.lists(st.sampled_from([GAP, ACCEPT, RELEASE, REJECT]), min_size=1, max_size=6),
            st.sampled_from([None, True, False]),  # immediate, or pending then committed / rolled back
        ),
        st.tuples(st.just("time"), st.integers(0, 150)),
        st.tuples(st.just("leave"), MEMBERS),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 39), max_size=8),
    controls=st.sets(st.integers(0, 8), max_size=2),
    gaps=st.sets(st.integers(0, 8), max_size=2),
    ops=OPS,
)
def test_runs_behave_as_the_per_record_model(cuts, controls, gaps, ops):
    log = _log(cuts, controls, gaps)
    sp = SharePartition(0, lock_duration_ms=LOCK_MS, delivery_limit=LIMIT, max_in_flight=LOCKS)
    model = Model(0)
    now = 0.0
    for op in ops:
        if op[0] == "acquire":
            start = sp.next_fetch_offset()
            assert start == min(
                (o for o, r in model.records.items() if r.state == RecordState.AVAILABLE), default=model.end
            )
            batches = [b for b in log if b.last_offset >= start]
            got = [tuple(r) for r in sp.acquire(op[1], batches, op[2], now)]
            assert got == model.acquire(op[1], batches, op[2], now)
        elif op[0] == "ack":
            _, member, first, length, types, durable = op
            types = types[:1] if len(types) != length else types
            token = None if durable is None else object()
            answer = sp.acknowledge(member, first, first + length - 1, types, token)
            if durable is False:  # the write failed: as if never acknowledged
                sp.rollback(token)
                assert answer == model.can_acknowledge(member, first, first + length - 1, types)
            else:
                if durable:
                    sp.commit(token)
                assert answer == model.acknowledge(member, first, first + length - 1, types)
        elif op[0] == "time":
            now += op[1]
            assert sp.expire_locks(now) == model.expire(now)
        else:
            assert sp.release_member(op[1]) == model.release_member(op[1])
        assert (sp.start_offset, sp.end_offset) == (model.start, model.end)
        mine = {o: (r.state, r.delivery_count, r.member_id) for o, r in sp.records().items()}
        assert mine == {o: (r.state, r.count, r.member) for o, r in model.records.items()}
        assert sp.acquired_count == sum(r.state == RecordState.ACQUIRED for r in model.records.values())
        runs = sp.runs
        assert all(a.last < b.first for a, b in zip(runs, runs[1:], strict=False))  # ordered, disjoint
    start, batches, done = sp.persisted()
    again = SharePartition(start, lock_duration_ms=LOCK_MS, delivery_limit=LIMIT, max_in_flight=LOCKS)
    again.restore(batches, log_end_offset=40)
    assert again.persisted() == (start, batches, done)
