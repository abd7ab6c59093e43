"""INSync topo package."""

from topo.models import TopologyError, hosts, parse_topology, switch_ids, switches
from topo.paths import ecmp_link_fractions, ecmp_next_hops

__all__ = [
    "TopologyError",
    "parse_topology",
    "hosts",
    "switches",
    "switch_ids",
    "ecmp_next_hops",
    "ecmp_link_fractions",
]
