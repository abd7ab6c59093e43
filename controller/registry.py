"""The methods of ``run --method``: name -> :class:`controller.runner.Method` subclass.

One table, apart from any method (the Mininet way: ``SWITCHES``, ``TOPOS``); a new method is a
module under ``controller/methods/`` and a line here.
"""

from __future__ import annotations

from controller.methods.async_ps import AsyncMethod
from controller.methods.cluster import ClusterMethod
from controller.methods.collective import CollectiveMethod
from controller.methods.ddp import DdpMethod
from controller.methods.ina import InaMethod
from controller.methods.ndn import NdnMethod
from controller.runner import Method

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
