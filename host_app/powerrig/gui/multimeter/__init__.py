"""The multimeter panel (one widget; it talks only to the core)."""
