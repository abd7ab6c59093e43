"""SwitchML-style aggregation (p4src/switchml.p4, docs/switchml.md): the wire codec, the
job, the pure worker state machine and the switch's rules for a job."""
