"""INSync workers package."""
