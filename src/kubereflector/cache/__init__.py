"""client-go's ``tools/cache``: keys, stores and indexers, listers, the ListerWatcher
protocol, the Reflector, the queues (DeltaFIFO, RealFIFO, FIFO), the Controller and
the SharedIndexInformer with its event handlers, compact objects and transforms.

This package knows nothing of HTTP: a ListerWatcher is any object with ``list`` and
``watch`` (:class:`kubereflector.client.ResourceListWatch` speaks to an API server,
:class:`kubereflector.testing.FakeControllerSource` to memory). Everything public
here is also importable from :mod:`kubereflector` itself.
"""

from __future__ import annotations

# The package's API is its modules' __all__, each listed once, in its own module.
from . import (
    compact,
    controller,
    delta_fifo,
    fifo,
    handlers,
    keys,
    listers,
    listwatch,
    queue,
    reflector,
    sharded_listwatch,
    shards,
    shared_informer,
    store,
    transforms,
)
from .compact import *  # noqa: F403
from .controller import *  # noqa: F403
from .delta_fifo import *  # noqa: F403
from .fifo import *  # noqa: F403
from .handlers import *  # noqa: F403
from .keys import *  # noqa: F403
from .listers import *  # noqa: F403
from .listwatch import *  # noqa: F403
from .queue import *  # noqa: F403
from .reflector import *  # noqa: F403
from .sharded_listwatch import *  # noqa: F403
from .shards import *  # noqa: F403
from .shared_informer import *  # noqa: F403
from .store import *  # noqa: F403
from .transforms import *  # noqa: F403

__all__ = (
    compact.__all__
    + controller.__all__
    + delta_fifo.__all__
    + fifo.__all__
    + handlers.__all__
    + keys.__all__
    + listers.__all__
    + listwatch.__all__
    + queue.__all__
    + reflector.__all__
    + sharded_listwatch.__all__
    + shards.__all__
    + shared_informer.__all__
    + store.__all__
    + transforms.__all__
)
