"""Understudy backend: sessions, devices, leases and durable command outcomes."""

__all__: list[str] = []
