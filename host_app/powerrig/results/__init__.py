"""Results: the store (SQLite by default, any SQLAlchemy URL), comparison and export."""
from powerrig.results.store import DEFAULT_DB, DatabaseFault, ResultStore, ResultsError

__all__ = ["DEFAULT_DB", "DatabaseFault", "ResultStore", "ResultsError"]
