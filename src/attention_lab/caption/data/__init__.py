"""The built-in digit-canvas generator."""
