"""Errors every storage implementation raises the same way, whatever its driver says."""

from __future__ import annotations


class StorageError(RuntimeError):
    """A storage operation failed for a reason the caller may want to tell apart."""


class ConflictError(StorageError):
    """A row with the same unique key exists already (primary key or unique index).

    The transaction it happened in is to be rolled back: let the error leave the
    `transaction()` block (PostgreSQL aborts the transaction at the first error anyway).
    """


class RetryableConflictError(ConflictError):
    """The transaction lost a race with another one (a serialization failure or a deadlock).

    Nothing of it was kept; running the whole transaction again may succeed. SQLite, with one
    writer at a time, never raises it.
    """


class StorageUnavailableError(StorageError):
    """The database cannot be reached or opened; the message says where and why (no password)."""


class StorageInUseError(StorageError):
    """Another service holds the database (one service per database)."""
