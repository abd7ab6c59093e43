"""SwitchML-style aggregation (p4src/switchml.p4, workers/switchml/) in the simulated network:
the design ``switchml`` of the INA design comparison (bench/suite, docs/suite.md)."""
