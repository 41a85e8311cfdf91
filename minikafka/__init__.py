"""minikafka: a Kafka-compatible, replicated message broker in Python.

The broker, its protocol, storage and controller live in their own top-level packages
(`broker/`, `protocol/`, `storage/`, `controller/`, ...). This package holds what applications
import: `minikafka.testing`, a real local cluster for their tests (a pytest plugin and a context
manager).
"""

import importlib.metadata

__version__ = importlib.metadata.version("minikafka")
