"""The outputs an ETL configuration delivers, as to-kafka's deliveries name them: the
one place the configuration (engine.etl) and delivery (engine.deliver) meet, above both."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.deliver.loop import DeliveryOutput
    from engine.etl.config import EtlConfig


def config_outputs(config: EtlConfig) -> list[DeliveryOutput]:
    """The outputs an ETL configuration delivers, each in its configured envelope."""
    from engine.deliver.loop import DeliveryOutput  # deferred: the codecs (pyarrow)

    return [DeliveryOutput(o.pool, o.topic, o.envelope, o.from_) for o in config.outputs]
