"""The NDN transport: names, packets, PS/worker state machines, routers and their processes."""
