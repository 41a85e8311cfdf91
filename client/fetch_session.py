"""The client side of incremental fetch sessions (KIP-227, Kafka's `FetchSessionHandler`); no I/O.

`build(wanted)` turns the partitions a fetcher wants (tp -> Fetch request partition fields) into
the session fields of its next Fetch request (v7+):
- no session yet: a full fetch at epoch 0 (INITIAL) listing every partition, which asks the broker
  to open a session;
- in a session: an incremental fetch at the session's next epoch listing only partitions added or
  whose fields changed since the last request, plus `forgotten_topics_data` for those dropped.
`handle_response(error_code, session_id)` advances the epoch after a successful response (or
adopts the id the broker granted) and forgets the session after a whole-request error, so the next
request is full again. A partition left out of an incremental response has nothing new.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

INITIAL_EPOCH, FINAL_EPOCH = 0, -1


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._sent: dict[TopicPartition, dict] = {}  # what the broker's session holds
        self._pending: dict[TopicPartition, dict] = {}  # what it will hold once the request succeeds

    def build(
        self,
        wanted: dict[TopicPartition, dict],
        changed: list[TopicPartition] | None = None,
        removed: list[TopicPartition] | None = None,
    ) -> dict:
        """`session_id`, `session_epoch`, `topics` and `forgotten_topics_data` of the next request.
        A caller that knows what changed since its last `wanted` names it (`changed`: added or
        with new fields; `removed`: dropped), and an incremental request is then built from
        those alone; without them every partition is compared."""
        self._pending = dict(wanted)
        if self.session_id == 0 or self.epoch == INITIAL_EPOCH:
            send, forgotten, epoch = wanted, [], INITIAL_EPOCH
        else:
            sent = self._sent
            # the same dict as last time is unchanged (callers reuse an idle partition's fields):
            # compared by identity before by value
            if changed is None or removed is None:
                send = {tp: p for tp, p in wanted.items() if (q := sent.get(tp)) is not p and q != p}
                forgotten = [tp for tp in sent if tp not in wanted]
            else:
                send = {tp: p for tp in changed if (q := sent.get(tp)) is not (p := wanted[tp]) and q != p}
                forgotten = [tp for tp in removed if tp in sent and tp not in wanted]
            epoch = self.epoch
        topics: dict[str, list[dict]] = {}
        for (topic, _), fields in send.items():
            topics.setdefault(topic, []).append(fields)
        dropped: dict[str, list[int]] = {}
        for topic, index in forgotten:
            dropped.setdefault(topic, []).append(index)
        return {
            "session_id": self.session_id,
            "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in dropped.items()],
        }

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Update from a response's top-level error code and session id; False (and the session
        forgotten) on an error."""
        if error_code != ErrorCode.NONE:
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH or self.session_id == 0:
            self.session_id = session_id
            self.epoch = 1 if session_id != 0 else INITIAL_EPOCH
        else:
            self.epoch = self.epoch + 1 if self.epoch < 2**31 - 1 else 1
        self._sent = self._pending
        return True

    def reset(self) -> None:
        self.session_id, self.epoch, self._sent, self._pending = 0, INITIAL_EPOCH, {}, {}
