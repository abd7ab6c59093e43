"""The synchronization methods, each a :class:`controller.experiment.runner.Method` subclass
(the name -> class table is :mod:`controller.experiment.registry`), one package per method:
``ina/`` (the default), ``ndn/``, ``cluster/``, ``collective/`` (bcube, ps, ring), ``async_ps/``,
``ddp/``, each with its runner in ``method.py``, its results row in ``row.py`` and its records, tables and plots
beside them.  ``bridged`` (Linux-bridge networks and schedule runs) and ``common`` (the
asynchronous PS's options) are shared by several."""
