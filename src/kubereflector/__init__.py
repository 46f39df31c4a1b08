"""kubereflector: client-go's ``tools/cache`` for Python.

A Reflector lists and watches a Kubernetes resource and mirrors it into a local,
indexed, thread-safe cache, with the queues, informers and test doubles that
controllers are built from. Everything public is importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._compiled import compiled_modules as _compiled_modules
from ._version import __version__

# -- backoff.py --
from .backoff import Backoff

# -- compact.py --
from .cache.compact import (
    CompactMetadata,
    CompactObject,
    ObjectMode,
    ReadOnlyDict,
    ReadOnlyList,
    ReadOnlyObjectError,
    decode_compact,
    to_compact,
)

# -- controller.py --
from .cache.controller import AlreadyStartedError, Controller, new_indexer_informer, new_informer

# -- delta_fifo.py --
from .cache.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, ReplacedAllInfo, TransformFunc

# -- fifo.py --
from .cache.fifo import FIFO, RealFIFO

# -- cache/handlers.py --
from .cache.handlers import (
    FilteringResourceEventHandler,
    ResourceEventHandler,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
)

# -- keys.py --
from .cache.keys import (
    DeletedFinalStateUnknown,
    ExplicitKey,
    KeyFunc,
    KeyFuncError,
    KubeObject,
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

# -- listers.py --
from .cache.listers import Lister, NamespaceLister, SelectorLike

# -- listwatch.py --
from .cache.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    INITIAL_EVENTS_END_ANNOTATION,
    MODIFIED,
    ListerWatcher,
    ListFunc,
    ListOptions,
    ListResult,
    ListWatch,
    WatchEvent,
    WatchEventType,
    WatchFunc,
    WatchStream,
)

# -- queue.py --
from .cache.queue import PopProcessFunc, Queue, QueueClosed, QueueEmpty

# -- reflector.py --
from .cache.reflector import (
    Reflector,
    ReflectorOptions,
    ReflectorPhase,
    ReflectorStats,
    RelistRequiredError,
    VeryShortWatchError,
    WatchErrorHandler,
    WatchListUnsupportedError,
    WatchStalledError,
    default_watch_error_handler,
)

# -- sharded_listwatch.py --
from .cache.sharded_listwatch import ShardedListWatch, ShardFilter, SyncedFilter

# -- shards.py --
from .cache.shards import (
    HASH_SPACE,
    NAMESPACE_FIELD,
    UID_FIELD,
    ShardField,
    ShardRange,
    ShardSelector,
    ShardSelectorError,
    fnv1a_64,
)

# -- shared_informer.py --
from .cache.shared_informer import (
    HandlerStats,
    InformerStats,
    InformerStoppedError,
    Registration,
    SharedIndexInformer,
    wait_for_cache_sync,
)

# -- store.py --
from .cache.store import (
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
    WatchChange,
    WatchChangeWriter,
    meta_namespace_index_func,
    new_indexer,
    new_store,
)

# -- transforms.py --
from .cache.transforms import compose, strip_managed_fields
from .clock import Clock, RealClock

# -- errors.py --
from .errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    DecodeError,
    ExpiredError,
    ForbiddenError,
    InvalidError,
    MethodNotAllowedError,
    NotFoundError,
    StatusCause,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    TruncatedStreamError,
    UnauthorizedError,
    error_from_status,
    failure_status,
    is_connection_refused,
)

# -- factory.py: loaded on first use (see __getattr__ below) --
if TYPE_CHECKING:
    from .factory import (
        FactoryShutdownError,
        SharedInformerFactory,
        SyncSharedInformerFactory,
        TweakListOptionsFunc,
        WrapListerWatcherFunc,
    )

# -- runner.py --
from .runner import run

# -- selectors.py --
from .selectors import (
    FieldRequirement,
    FieldSelector,
    LabelRequirement,
    LabelSelector,
    label_selector_from_dict,
)

__compiled__: tuple[str, ...] = _compiled_modules()
"""The modules of this installation compiled by mypyc (``KUBEREFLECTOR_MYPYC=1 pip
install .``), e.g. ``("kubereflector.cache.store", ...)``; ``()`` when it is pure
Python (the default). Both forms behave the same."""

_FACTORY_NAMES = frozenset(
    {
        "FactoryShutdownError",
        "SharedInformerFactory",
        "SyncSharedInformerFactory",
        "TweakListOptionsFunc",
        "WrapListerWatcherFunc",
    }
)


def __getattr__(name: str) -> object:
    """The factory's names, imported on first use: the factory joins the cache with
    the HTTP client, and ``import kubereflector`` must not load aiohttp (a program
    that only uses the cache and its test doubles never pays for HTTP)."""
    if name in _FACTORY_NAMES:
        from . import factory

        value = getattr(factory, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "FIFO",
    "HASH_SPACE",
    "INITIAL_EVENTS_END_ANNOTATION",
    "MODIFIED",
    "NAMESPACE_FIELD",
    "NAMESPACE_INDEX",
    "UID_FIELD",
    "AlreadyExistsError",
    "AlreadyStartedError",
    "ApiError",
    "Backoff",
    "BadRequestError",
    "Cache",
    "Clock",
    "CompactMetadata",
    "CompactObject",
    "ConflictError",
    "Controller",
    "DecodeError",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "ExpiredError",
    "ExplicitKey",
    "FactoryShutdownError",
    "FieldRequirement",
    "FieldSelector",
    "FilteringResourceEventHandler",
    "ForbiddenError",
    "HandlerStats",
    "IndexFunc",
    "IndexFuncError",
    "Indexer",
    "Indexers",
    "InformerStats",
    "InformerStoppedError",
    "InvalidError",
    "KeyFunc",
    "KeyFuncError",
    "KeyListerGetter",
    "KubeObject",
    "LabelRequirement",
    "LabelSelector",
    "ListFunc",
    "ListOptions",
    "ListResult",
    "ListWatch",
    "Lister",
    "ListerWatcher",
    "MethodNotAllowedError",
    "NamespaceLister",
    "NotFoundError",
    "ObjectMode",
    "PopProcessFunc",
    "Queue",
    "QueueClosed",
    "QueueEmpty",
    "ReadOnlyDict",
    "ReadOnlyList",
    "ReadOnlyObjectError",
    "RealClock",
    "RealFIFO",
    "Reflector",
    "ReflectorOptions",
    "ReflectorPhase",
    "ReflectorStats",
    "ReflectorStore",
    "Registration",
    "RelistRequiredError",
    "ReplacedAllInfo",
    "ResourceEventHandler",
    "ResourceEventHandlerDetailedFuncs",
    "ResourceEventHandlerFuncs",
    "ResourceVersionUpdater",
    "SelectorLike",
    "ShardField",
    "ShardFilter",
    "ShardRange",
    "ShardSelector",
    "ShardSelectorError",
    "ShardedListWatch",
    "SharedIndexInformer",
    "SharedInformerFactory",
    "StatusCause",
    "Store",
    "SyncSharedInformerFactory",
    "SyncedFilter",
    "ThreadSafeStore",
    "TooLargeResourceVersionError",
    "TooManyRequestsError",
    "TransformFunc",
    "TruncatedStreamError",
    "TweakListOptionsFunc",
    "UnauthorizedError",
    "UnknownIndexError",
    "VeryShortWatchError",
    "WatchChange",
    "WatchChangeWriter",
    "WatchErrorHandler",
    "WatchEvent",
    "WatchEventType",
    "WatchFunc",
    "WatchListUnsupportedError",
    "WatchStalledError",
    "WatchStream",
    "WrapListerWatcherFunc",
    "__compiled__",
    "__version__",
    "compose",
    "decode_compact",
    "default_watch_error_handler",
    "deletion_handling_meta_namespace_key_func",
    "error_from_status",
    "failure_status",
    "fnv1a_64",
    "get_labels",
    "get_metadata",
    "get_name",
    "get_namespace",
    "get_resource_version",
    "get_uid",
    "is_connection_refused",
    "label_selector_from_dict",
    "meta_namespace_index_func",
    "meta_namespace_key_func",
    "new_indexer",
    "new_indexer_informer",
    "new_informer",
    "new_store",
    "run",
    "split_meta_namespace_key",
    "strip_managed_fields",
    "to_compact",
    "wait_for_cache_sync",
]
