"""KIP-932 on the partition leader: each share-partition's in-flight records (`share_partition`),
the share sessions of ShareFetch / ShareAcknowledge (`share_sessions`) and the manager that reads
the log for them (`share_manager`)."""
