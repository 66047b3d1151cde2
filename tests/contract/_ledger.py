"""What the contract run saw: (operation, status, code) observations, case counts, and the secrets
it generated or was issued, so the leak check knows what must never come back in a response."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# A secret shorter than this, or made of one or two distinct characters, is too likely to occur
# in an innocent response by chance (fuzzed profile keys such as "0" or "00000000").
MIN_DISTINCT_SECRET = 8


@dataclass
class Ledger:
    """Thread-safe record of the run; one instance per pytest session."""

    # (operationId, status) -> where it was observed ("fuzz", "stateful" or a scenario test name)
    observed: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    # (operationId, status) -> problem codes seen
    codes: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    cases: Counter[str] = field(default_factory=Counter)
    _secrets: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, operation_id: str, status: int, source: str, code: str | None) -> None:
        with self._lock:
            self.observed.setdefault((operation_id, status), set()).add(source)
            if code is not None:
                self.codes.setdefault((operation_id, status), set()).add(code)

    def count(self, source: str) -> None:
        with self._lock:
            self.cases[source] += 1

    def secret(self, value: str) -> None:
        """Remember a value no response may ever contain (ignored when it is not distinctive)."""
        if len(value) >= MIN_DISTINCT_SECRET and len(set(value)) > 2:
            with self._lock:
                self._secrets.add(value)

    def secrets(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._secrets)

    def dumps(self) -> str:
        """What was observed and counted, as JSON (the secrets stay in this process)."""
        with self._lock:
            data: dict[str, Any] = {
                "observed": [[op, st, sorted(src)] for (op, st), src in self.observed.items()],
                "codes": [[op, st, sorted(codes)] for (op, st), codes in self.codes.items()],
                "cases": dict(self.cases),
            }
        return json.dumps(data)

    @classmethod
    def loads(cls, text: str) -> Ledger:
        """The ledger `dumps` wrote, in another process."""
        data = json.loads(text)
        return cls(
            observed={(op, st): set(src) for op, st, src in data["observed"]},
            codes={(op, st): set(codes) for op, st, codes in data["codes"]},
            cases=Counter(data["cases"]),
        )


LEDGER = Ledger()
