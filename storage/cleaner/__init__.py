"""The log cleaner: compaction of `cleanup.policy=compact` logs (Kafka's `LogCleaner`,
`LogCleanerManager`, `Cleaner`).

- `offset_map`: the bounded key -> latest offset map of one cleaning (Kafka's `SkimpyOffsetMap`);
- `cleaner`: one cleaning of one log, as plain file work that runs in a worker process: build the
  offset map over the dirty section, rewrite the segments into `.cleaned` files (Kafka's `Cleaner`);
- `manager`: which log to clean next and how far, the `cleaner-offset-checkpoint` files, and the
  per-log cleaning state (Kafka's `LogCleanerManager`), with no I/O beyond the checkpoints;
- `log_cleaner`: the trio shell that schedules cleanings on worker processes (trio-parallel) and
  swaps the cleaned segments into the logs (`Log.replace_segments`).
"""
