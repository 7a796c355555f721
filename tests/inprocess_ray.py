"""A stand-in for Ray that runs actors in the calling process: the logic of pbmarl's Ray backends
(what is sent, in which order, with which options) without Ray's transport or start-up time.

Use it with ``monkeypatch.setattr(pbmarl.hosting.ray, "import_ray", lambda: InProcessRay())``
and ``init_ray`` patched to a no-op; ``InProcessRay.options`` lists the options of every actor made.
"""

from __future__ import annotations


class InProcessRay:
    """Just enough of Ray's API to run pbmarl's actors (P2SRO levels, parallel oracles) in this process."""

    class _Method:
        def __init__(self, fn):
            self.remote = fn

    class _Handle:
        def __init__(self, obj):
            self._obj = obj

        def __getattr__(self, name):
            return InProcessRay._Method(getattr(self._obj, name))

    options: list[dict] = []

    def remote(self, **options):
        self.options.append(options)
        return lambda cls: InProcessRay._Method(lambda *a, **k: InProcessRay._Handle(cls(*a, **k)))

    class exceptions:  # noqa: N801 (Ray's module name)
        class GetTimeoutError(Exception):
            pass

    @staticmethod
    def get(value, timeout=None):
        return value

    @staticmethod
    def kill(handle):
        pass
