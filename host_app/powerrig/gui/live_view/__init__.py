"""The live_view panel (one widget; it talks only to the core)."""
