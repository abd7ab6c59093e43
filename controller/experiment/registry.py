"""The methods of ``run --method``: name -> :class:`controller.experiment.runner.Method` subclass,
and name -> the results row ``compare`` reads (:mod:`controller.experiment.rows`).

One table, apart from any method (the Mininet way: ``SWITCHES``, ``TOPOS``); a new method is a
package under ``controller/experiment/methods/`` and a line here.
"""

from __future__ import annotations

from controller.experiment.methods.async_ps.method import AsyncMethod
from controller.experiment.methods.async_ps.row import AsyncRow
from controller.experiment.methods.cluster.method import ClusterMethod
from controller.experiment.methods.cluster.row import ClusterRow
from controller.experiment.methods.collective.method import CollectiveMethod
from controller.experiment.methods.collective.row import CollectiveRow
from controller.experiment.methods.ddp.method import DdpMethod
from controller.experiment.methods.ddp.row import DdpRow
from controller.experiment.methods.ina.method import InaMethod
from controller.experiment.methods.ina.row import InaRow
from controller.experiment.methods.ndn.method import NdnMethod
from controller.experiment.methods.ndn.row import NdnRow
from controller.experiment.rows import MethodRow
from controller.experiment.runner import Method

__all__ = ["METHODS", "ROWS", "DEFAULT_METHOD"]

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

ROWS: dict[str, type[MethodRow]] = {
    "ina": InaRow,
    "async": AsyncRow,
    "bcube": CollectiveRow,
    "ps": CollectiveRow,
    "ring": CollectiveRow,
    "cluster": ClusterRow,
    "ndn": NdnRow,
    "ddp": DdpRow,
}
"""What ``compare`` reads of each method's ``results.json``: its typed row (one per method,
declared beside it; a results file without ``method`` is INA's, as the first ones were)."""
