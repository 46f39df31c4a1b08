"""A user's plain-threads program, as mypy --strict sees it: the blocking factory
(no await anywhere). Type-checked by test_typecheck.py, never run."""

from __future__ import annotations

from typing_extensions import assert_type

from kubereflector import (
    KubeObject,
    Lister,
    ResourceEventHandlerFuncs,
    SyncSharedInformerFactory,
)
from kubereflector.client import load_config


def on_add(pod: KubeObject) -> None:
    print(pod["metadata"]["name"])


def main() -> None:
    with SyncSharedInformerFactory(load_config()) as factory:
        registration = factory.informer_for("pods").add_event_handler(
            ResourceEventHandlerFuncs(on_add=on_add)
        )
        factory.start()
        synced = factory.wait_for_cache_sync(timeout=60, handlers=[registration])
        assert_type(synced, dict[str, bool])
        if not all(synced.values()):
            raise SystemExit("not synced")
        pods = factory.lister_for("pods")
        assert_type(pods, Lister[KubeObject])
        for pod in pods.list():
            copy = dict(pod)  # a copy of one's own may be changed
            copy["metadata"] = {"name": "changed"}
    assert_type(factory.shutdown(), None)


if __name__ == "__main__":
    main()
