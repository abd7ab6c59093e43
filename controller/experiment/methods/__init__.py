"""The synchronization methods, each a :class:`controller.experiment.runner.Method` subclass in
its own module (the name -> class table is :mod:`controller.experiment.registry`); a method's
records, tables and plots live in sibling modules (``*_records``, ``*_report``, ``*_plots``)."""
