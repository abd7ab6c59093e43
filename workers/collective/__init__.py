"""Collective schedules (BCube, ring, PS baselines) and the node process that replays them."""
