"""In-network aggregation: the INA wire protocol, the PS and worker state machines and their processes."""
