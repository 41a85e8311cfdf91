"""The web console every broker serves on its metrics port (issue 38): read-only, server-rendered
HTML, no JavaScript. `snapshot` reads one broker's state into JSON-able dicts (pure); `view`
merges every broker's snapshot into the cluster's picture (pure); `pages` renders it (pure);
`server` is the trio shell - routes, authentication under security, and fetching the other
brokers' snapshots."""
