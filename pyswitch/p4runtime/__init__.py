"""pyswitch's P4Runtime server in layers (service, arbitration, pipeline, entities, translation,
packet I/O) and the value codec and P4Info index that the controller's client shares."""
