"""INSync controller package."""
