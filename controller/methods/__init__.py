"""One module per synchronization method, each a :class:`controller.runner.Method` subclass
(the name -> class table is :mod:`controller.registry`)."""
