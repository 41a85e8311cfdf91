"""The controller-to-broker requests (Kafka ZooKeeper mode):
LeaderAndIsr (key 4) v0-7, StopReplica (key 5) v0-4, UpdateMetadata (key 6) v0-8.
Each is fenced by controller epoch and broker epoch in the replica manager."""


async def leader_and_isr(ctx, request):
    return ctx.replica_manager.become_leader_or_follower(request.body, request.api_version)


async def stop_replica(ctx, request):
    return ctx.replica_manager.stop_replicas(request.body, request.api_version)


async def update_metadata(ctx, request):
    return ctx.replica_manager.update_metadata(request.body)


HANDLERS = {4: leader_and_isr, 5: stop_replica, 6: update_metadata}
