"""Where a follower truncates before fetching from a new leader: KIP-101 (leader epochs instead of
the high watermark) with KIP-279's refinement for an epoch the leader does not know.

The follower asks the leader (OffsetForLeaderEpoch) for the end offset of its own latest epoch; the
leader answers with the largest epoch it knows that is <= the requested one and where that epoch
ended in its log. The follower keeps everything up to the smaller of that end offset and its own
end offset for the same epoch. Pure function, table-tested.
"""

from __future__ import annotations

from storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache


def truncation_offset(
    cache: LeaderEpochCache, log_end_offset: int, high_watermark: int, leader_epoch: int, leader_end_offset: int
) -> int:
    """The offset to truncate the follower's log to (everything at or above it goes).

    leader_epoch / leader_end_offset: the leader's OffsetForLeaderEpoch answer. When the leader
    knows no epoch (UNDEFINED), fall back to the high watermark as pre-KIP-101 Kafka did.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET or leader_epoch == UNDEFINED_EPOCH:
        return min(high_watermark, log_end_offset)
    local_epoch, local_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if local_epoch == UNDEFINED_EPOCH:  # the follower knows nothing of that epoch or earlier ones
        return min(leader_end_offset, log_end_offset)
    return min(leader_end_offset, local_end, log_end_offset)
