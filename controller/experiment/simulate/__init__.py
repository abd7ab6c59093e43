"""``python -m controller simulate``: the INA experiment in virtual time (docs/simulate.md)."""
