"""Collective schedules (BCube, ring, PS baselines) and the process that replays them."""
