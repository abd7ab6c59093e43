"""INSync pyswitch package."""
