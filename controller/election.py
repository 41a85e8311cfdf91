"""Leader selection as pure functions (Kafka `PartitionLeaderElectionAlgorithms`).

Each takes the assignment (AR, in order), the ISR and the live brokers and returns the new leader
(or None), with the ISR to write alongside it.
"""

from __future__ import annotations


def offline_partition_leader(
    assignment: list[int], isr: list[int], live: set[int], unclean_enabled: bool
) -> tuple[int, list[int]] | None:
    """First live ISR member in assignment order; with unclean election enabled and no such
    member, the first live replica (the ISR becomes just it: data it lacks is lost)."""
    live_isr = [r for r in isr if r in live]
    leader = next((r for r in assignment if r in live_isr), None)
    if leader is not None:
        return leader, live_isr
    if unclean_enabled:
        leader = next((r for r in assignment if r in live), None)
        if leader is not None:
            return leader, [leader]
    return None


def preferred_replica_leader(assignment: list[int], isr: list[int], live: set[int]) -> tuple[int, list[int]] | None:
    """The first assigned replica, if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0], list(isr)
    return None


def controlled_shutdown_leader(
    assignment: list[int], isr: list[int], live: set[int], shutting_down: set[int]
) -> tuple[int, list[int]] | None:
    """First live ISR member not shutting down; the ISR drops the brokers shutting down."""
    new_isr = [r for r in isr if r not in shutting_down]
    leader = next((r for r in assignment if r in new_isr and r in live), None)
    return (leader, new_isr) if leader is not None else None
