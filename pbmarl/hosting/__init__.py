"""Where code runs: the one package that imports Ray (inside functions, so importing it loads no Ray).

* `pbmarl.hosting.ray`: `import_ray`, `init_ray` (start an embedded instance or join a cluster),
  the clean-up after a failed start, and the few Ray calls code elsewhere needs;
* `pbmarl.hosting.security`: token auth and loopback-only listening for an embedded instance;
* `pbmarl.hosting.liveness`: noticing a lost Ray head (`RayHeadLost`) instead of a dead process.

    import pbmarl as pb
    pb.init_ray()                  # local, all cores
    pb.init_ray(address="auto")    # the cluster this machine belongs to
"""

from pbmarl.hosting.liveness import RayHeadLost
from pbmarl.hosting.ray import init_ray

__all__ = ["RayHeadLost", "init_ray"]
