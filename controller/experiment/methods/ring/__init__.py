"""The host-only ring all-reduce baseline (workers/ring/): run in the simulated network
(``sim``), the design ``ring`` of the INA design comparison (bench/suite, docs/suite.md)."""
