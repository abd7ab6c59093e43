"""The methods of ``run --method``: name -> :class:`controller.experiment.runner.Method` subclass.

One table, apart from any method (the Mininet way: ``SWITCHES``, ``TOPOS``); a new method is a
package under ``controller/experiment/methods/`` and a line here.
"""

from __future__ import annotations

from controller.experiment.methods.async_ps.method import AsyncMethod
from controller.experiment.methods.cluster.method import ClusterMethod
from controller.experiment.methods.collective.method import CollectiveMethod
from controller.experiment.methods.ddp.method import DdpMethod
from controller.experiment.methods.ina import InaMethod
from controller.experiment.methods.ndn.method import NdnMethod
from controller.experiment.runner import Method

__all__ = ["METHODS", "DEFAULT_METHOD"]

METHODS: dict[str, type[Method]] = {
    "ina": InaMethod,
    "async": AsyncMethod,
    "bcube": CollectiveMethod,
    "ps": CollectiveMethod,  # the BCube runner's TCP PS baseline alone
    "ring": CollectiveMethod,  # its ring all-reduce baselines alone
    "cluster": ClusterMethod,
    "ndn": NdnMethod,
    "ddp": DdpMethod,
}
DEFAULT_METHOD = "ina"
