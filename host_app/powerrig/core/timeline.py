"""The timeline: every command and workload phase, stamped in host UTC at call and at return.

Events are placed on the sample clock later through the clock model (powerrig.core.clock), so a
capture holds them in host UTC as observed plus the model that maps UTC to sample index.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from powerrig.core.names import EventKind

# kinds of events (powerrig.core.names.EventKind; the names stay importable from here)
NVME = EventKind.NVME
FIO = EventKind.FIO
PHASE = EventKind.PHASE
POWER_STATE = EventKind.POWER_STATE
MARKER = EventKind.MARKER
GAP = EventKind.GAP
NOTE = EventKind.NOTE


@dataclass
class Event:
    kind: EventKind | str                # an EventKind; a kind this version does not know stays a string
    name: str
    t_start: float                      # host UTC seconds (time.time()) at call / phase start
    t_end: float | None = None          # host UTC at return / phase end; None while running
    ok: bool = True
    argv: list[str] | None = None       # the exact command line run, for reproduction
    result: dict = field(default_factory=dict)
    error: str | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind in EventKind.__members__.values():
            self.kind = EventKind(self.kind)

    @property
    def duration(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_start

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = str(self.kind)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Event":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


class Timeline:
    """Thread-safe ordered list of events; the runners append, the capture and analysis read."""

    def __init__(self, events: list[Event] | None = None, keep: int | None = None):
        """keep: hold at most about this many events, letting the oldest finished ones go (a window
        streaming overnight polls the drive every few seconds; its capture file keeps every event)."""
        self._events: list[Event] = list(events or [])
        self._lock = threading.Lock()
        self.keep = keep
        self.dropped = 0            # events let go from the front: positions stay absolute (``since``)

    def add(self, event: Event) -> Event:
        with self._lock:
            self._events.append(event)
            if self.keep is not None and len(self._events) > self.keep:
                n, k = len(self._events) - self.keep, 0
                while k < n and self._events[k].t_end is not None:     # only finished events leave
                    k += 1
                del self._events[:k]
                self.dropped += k
        return event

    @property
    def added(self) -> int:
        """Events ever added (held + let go)."""
        return self.dropped + len(self._events)

    def begin(self, kind: str, name: str, **kw) -> Event:
        """Start an event now; finish it with ``end``."""
        return self.add(Event(kind, name, time.time(), **kw))

    @staticmethod
    def end(event: Event, ok: bool = True, error: str | None = None, **result) -> Event:
        event.t_end = time.time()
        event.ok = ok
        event.error = error
        event.result.update(result)
        return event

    def __iter__(self) -> Iterator[Event]:
        with self._lock:
            return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def since(self, k: int) -> tuple[int, list[Event]]:
        """(position of the first, the events) from the ``k``-th added on, or from the oldest still
        held: a reader that has seen the first k need not copy them all again."""
        with self._lock:
            first = max(k, self.dropped)
            return first, self._events[first - self.dropped:]

    def events(self, kind: str | None = None, t0: float | None = None, t1: float | None = None) -> list[Event]:
        """Events of a kind overlapping [t0, t1] (host UTC)."""
        out = []
        for e in self:
            if kind and e.kind != kind:
                continue
            end = e.t_end if e.t_end is not None else e.t_start
            if t0 is not None and end < t0:
                continue
            if t1 is not None and e.t_start > t1:
                continue
            out.append(e)
        return out

    def to_jsonl(self, path: str | Path) -> None:
        with open(path, "w") as f:
            for e in self:
                f.write(json.dumps(e.to_dict()) + "\n")

    @classmethod
    def from_jsonl(cls, path: str | Path) -> "Timeline":
        with open(path) as f:
            return cls([Event.from_dict(json.loads(line)) for line in f if line.strip()])
