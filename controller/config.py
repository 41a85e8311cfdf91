"""The broker settings the controller reads (a slice of Kafka's `KafkaConfig`, built by
`broker.config.BrokerConfig.controller_config()`, so the controller does not depend on the broker)."""

from __future__ import annotations

from dataclasses import dataclass

from security.config import PLAINTEXT_CLIENT, ClientSecurity


@dataclass(frozen=True)
class ControllerConfig:
    broker_id: int  # broker.id
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_seconds: int = 300  # leader.imbalance.check.interval.seconds
    #: control.plane.listener.name: the brokers' listener the controller sends its requests to
    #: (None: the inter-broker listener)
    control_plane_listener_name: str | None = None
    #: the listener brokers replicate over (the first listener that is not the control plane's)
    inter_broker_listener_name: str | None = None
    #: how the request channels connect to `controller_listener` (its protocol and credentials)
    client_security: ClientSecurity = PLAINTEXT_CLIENT

    @property
    def controller_listener(self) -> str | None:
        """The listener whose endpoint the controller's request channels connect to."""
        return self.control_plane_listener_name or self.inter_broker_listener_name
