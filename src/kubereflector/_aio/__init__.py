"""The asyncio and thread plumbing every layer shares (private).

``loop_thread``: the background event-loop thread of the sync facades;
``tasks``: cancel-and-wait and the running-loop check; ``timeout``: deadlines on a
:class:`~kubereflector.Clock`; ``wakeup``: blocking ``pop`` for coroutines and
threads alike, used by the cache's queues and the workqueue.
"""
