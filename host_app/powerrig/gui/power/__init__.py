"""The power panel (one widget; it talks only to the services and the core's signals)."""
