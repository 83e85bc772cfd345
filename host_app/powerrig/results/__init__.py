"""Results: the store (SQLite by default, any SQLAlchemy URL), comparison and export."""
from powerrig.results.store import DatabaseFault, ResultStore, ResultsError

__all__ = ["DatabaseFault", "ResultStore", "ResultsError"]
