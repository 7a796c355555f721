"""A stand-in for Ray that runs actors in the calling process: the logic of pbmarl's Ray backends
(what is sent, in which order, with which options) without Ray's transport or start-up time.

Use it with ``monkeypatch.setattr(pbmarl.hosting.ray, "import_ray", lambda: InProcessRay())``
and ``init_ray`` patched to a no-op; ``InProcessRay.options`` lists the options of every actor made.
"""

from __future__ import annotations


class InProcessRay:
    """Just enough of Ray's API to run pbmarl's actors (`pbmarl.hosting.Hosted`: P2SRO's ladder and levels,
    parallel oracles) in this process."""

    class _Method:
        def __init__(self, fn):
            self.remote = fn

    class _Handle:
        def __init__(self, obj):
            self._obj = obj

        def __getattr__(self, name):
            if name == "__ray_ready__":
                return InProcessRay._Method(lambda: True)
            return InProcessRay._Method(getattr(self._obj, name))

    class _Class:
        def __init__(self, cls):
            self.cls = cls

        def options(self, **options):
            InProcessRay.options.append(options)
            return InProcessRay._Method(lambda *a, **k: InProcessRay._Handle(self.cls(*a, **k)))

    options: list[dict] = []

    def remote(self, cls):
        return InProcessRay._Class(cls)

    class exceptions:  # noqa: N801 (Ray's module name)
        class GetTimeoutError(Exception):
            pass

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def get(value, timeout=None):
        return value

    @staticmethod
    def kill(handle, no_restart=True):
        pass
