"""INSync topo package."""
