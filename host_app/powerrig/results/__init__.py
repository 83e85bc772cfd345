"""Results: the store (SQLite by default, any SQLAlchemy URL), comparison and export."""
from powerrig.results.store import DEFAULT_DB, ResultStore, ResultsError

__all__ = ["DEFAULT_DB", "ResultStore", "ResultsError"]
