"""The version strings Kafka 3.8's `MetadataVersion.fromVersionString` accepts, for the deprecated
`message.format.version` (topic) and `log.message.format.version` (broker) keys, which Kafka still
validates although it ignores them since 3.0 (every batch is written as magic 2).

A string names a release by its first three dot-separated parts for 0.x releases ("0.10.0",
"0.10.0.1" -> "0.10.0") and its first two otherwise ("2.8.1" -> "2.8"), or a release and an
inter-broker protocol step ("0.10.0-IV1", "3.0-IV1"); the release must be one Kafka 3.8 knows.
"""

from __future__ import annotations

#: release -> its IV steps (an empty tuple: the release has none), Kafka 3.8's MetadataVersion
_RELEASES: dict[str, tuple[int, ...]] = {
    "0.8.0": (),
    "0.8.1": (),
    "0.8.2": (),
    "0.9.0": (),
    "0.10.0": (0, 1),
    "0.10.1": (0, 1, 2),
    "0.10.2": (0,),
    "0.11.0": (0, 1, 2),
    "1.0": (0,),
    "1.1": (0,),
    "2.0": (0, 1),
    "2.1": (0, 1, 2),
    "2.2": (0, 1),
    "2.3": (0, 1),
    "2.4": (0, 1),
    "2.5": (0,),
    "2.6": (0,),
    "2.7": (0, 1, 2),
    "2.8": (0, 1),
    "3.0": (0, 1),
    "3.1": (0,),
    "3.2": (0,),
    "3.3": (0, 1, 2, 3),
    "3.4": (0,),
    "3.5": (0, 1, 2),
    "3.6": (0, 1, 2),
    "3.7": (0, 1, 2, 3, 4),
    "3.8": (0,),
}
VALID: frozenset[str] = frozenset(_RELEASES) | frozenset(f"{r}-IV{i}" for r, ivs in _RELEASES.items() for i in ivs)


def parse(value: str) -> str:
    """The release or release-IV step `value` names (`fromVersionString`'s key). Raises
    ValueError naming the value when Kafka 3.8 would refuse it."""
    segments = value.split(".")
    wanted = 3 if value.startswith("0.") else 2
    key = value if wanted >= len(segments) else ".".join(segments[:wanted])
    if key not in VALID:
        raise ValueError(f"Version {value} is not a valid version")
    return key
