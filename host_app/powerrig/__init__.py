"""powerrig: power measurement for NVMe SSDs on an interposer rig (or its simulator)."""

__version__ = "0.1.0"
