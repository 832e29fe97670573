"""The HTTP routes, one module per concern; each route only wires dependencies to a call."""
