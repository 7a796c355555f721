"""Where code runs: the one package that imports Ray (inside functions, so importing it loads no Ray)
and creates actors.

* `pbmarl.hosting.hosted`: `Hosted(cls, args, backend=..., num_cpus=...)`, one object in this process
  or in a Ray actor, called the same way (placement time-out, `HostDied`); every actor pbmarl makes
  is one (the rollout pool's workers, the distributed server, replay and workers, P2SRO's ladder and
  levels, `ParallelOracle`'s copies);
* `pbmarl.hosting.shipping`: policies sent to an actor once (`PolicyTokens`, `ship`/`unship`,
  `TargetShipper`/`unpack` for lists of target mixtures);
* `pbmarl.hosting.executors`: `RayExecutor`, the distributed modes' workers as actors;
* `pbmarl.hosting.ray`: `import_ray`, `init_ray` (start an embedded instance or join a cluster),
  the clean-up after a failed start, and the few Ray calls code elsewhere needs;
* `pbmarl.hosting.security`: token auth and loopback-only listening for an embedded instance;
* `pbmarl.hosting.liveness`: noticing a lost Ray head (`RayHeadLost`) instead of a dead process.

    import pbmarl as pb
    pb.init_ray()                  # local, all cores
    pb.init_ray(address="auto")    # the cluster this machine belongs to
"""

from pbmarl.hosting.hosted import HostDied, Hosted
from pbmarl.hosting.liveness import RayHeadLost
from pbmarl.hosting.ray import init_ray

__all__ = ["HostDied", "Hosted", "RayHeadLost", "init_ray"]
