"""PyTorch DDP over INSync's in-network aggregation (issue 18; docs/ddp.md).

Pure parts (no I/O, no torch): ``codec`` (bucket <-> chunks, step layout), ``exchange`` (a
rank's per-bucket sender state machines), ``job`` (job files with DDP's chunk capacity) and
``check`` (exactness from saved buckets).  Shells: ``transport`` (UDP, a thread per rank),
``fake`` (in-process network and a loopback PS for tests and local tries) and ``hook`` (the
``register_comm_hook`` hook; the only module that imports torch).
"""
