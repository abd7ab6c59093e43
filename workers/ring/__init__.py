"""Host-only ring all-reduce over UDP through plain forwarding (a baseline, issue 44)."""
