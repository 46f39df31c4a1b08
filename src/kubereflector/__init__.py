"""kubereflector: client-go's ``tools/cache`` for Python.

A Reflector lists and watches a Kubernetes resource and mirrors it into a local,
indexed, thread-safe cache, with the queues, informers and test doubles that
controllers are built from. Everything public is importable from here.
"""

from __future__ import annotations

# -- delta_fifo.py --
from .delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, TransformFunc

# -- fifo.py --
from .fifo import FIFO, RealFIFO

# -- keys.py --
from .keys import (
    DeletedFinalStateUnknown,
    ExplicitKey,
    KeyFunc,
    KeyFuncError,
    deletion_handling_meta_namespace_key_func,
    get_labels,
    get_metadata,
    get_name,
    get_namespace,
    get_resource_version,
    get_uid,
    meta_namespace_key_func,
    split_meta_namespace_key,
)

# -- queue.py --
from .queue import PopProcessFunc, Queue, QueueClosed, QueueEmpty

# -- store.py --
from .store import (
    NAMESPACE_INDEX,
    Cache,
    Indexer,
    Indexers,
    IndexFunc,
    IndexFuncError,
    KeyListerGetter,
    ReflectorStore,
    ResourceVersionUpdater,
    Store,
    ThreadSafeStore,
    UnknownIndexError,
    meta_namespace_index_func,
    new_indexer,
    new_store,
)

__version__ = "0.1.0"

__all__ = [
    "FIFO",
    "NAMESPACE_INDEX",
    "Cache",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "ExplicitKey",
    "IndexFunc",
    "IndexFuncError",
    "Indexer",
    "Indexers",
    "KeyFunc",
    "KeyFuncError",
    "KeyListerGetter",
    "PopProcessFunc",
    "Queue",
    "QueueClosed",
    "QueueEmpty",
    "RealFIFO",
    "ReflectorStore",
    "ResourceVersionUpdater",
    "Store",
    "ThreadSafeStore",
    "TransformFunc",
    "UnknownIndexError",
    "__version__",
    "deletion_handling_meta_namespace_key_func",
    "get_labels",
    "get_metadata",
    "get_name",
    "get_namespace",
    "get_resource_version",
    "get_uid",
    "meta_namespace_index_func",
    "meta_namespace_key_func",
    "new_indexer",
    "new_store",
    "split_meta_namespace_key",
]
