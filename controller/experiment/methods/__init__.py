"""One module per synchronization method, each a :class:`controller.experiment.runner.Method` subclass
(the name -> class table is :mod:`controller.experiment.registry`)."""
