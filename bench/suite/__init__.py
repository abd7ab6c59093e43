"""The INA design-space benchmark suite (issue 44): ``python -m bench.suite`` (docs/suite.md)."""
