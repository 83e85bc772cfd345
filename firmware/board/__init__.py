"""Hardware access for the RP2350 interposer. Nothing but hardware lives here."""
