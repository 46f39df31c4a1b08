"""The Manager's entries for webhooks (a base of :class:`~kubereflector.runtime.Manager`):
``webhook_port`` wires a :class:`~kubereflector.runtime.webhooks.WebhookServer` in as a
runnable of every replica, and ``validator``, ``defaulter`` and ``converter`` register
into the manager's :class:`~kubereflector.runtime.webhooks.Webhooks`. Private: kept
apart so that the manager's module stays about running controllers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .webhooks.conversion import Conversion
from .webhooks.registry import DefaulterOptions, HandlerDecorator, ValidatorOptions, Webhooks
from .webhooks.server import WebhookOptions, WebhookServer

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..client.rest import Client
    from ..clock import Clock
    from ..metrics import Metrics
    from ..models import ApiResource
    from .runnable import Runnable

__all__: list[str] = []

T = TypeVar("T")
H = TypeVar("H")
S = TypeVar("S")


class _WebhookEntries:
    """What the Manager adds for webhooks (see the module documentation)."""

    # The manager's, used here.
    metrics: Metrics
    _client: Client
    _clock: Clock
    _runnables: list[tuple[Runnable, bool]]
    _readyz: dict[str, Callable[[], bool]]

    def _check_new(self, what: str) -> None:
        raise NotImplementedError  # the Manager's

    def _init_webhooks(
        self, port: int | None, options: WebhookOptions | None, *, host: str
    ) -> None:
        self._webhooks = Webhooks()
        self._webhook_server: WebhookServer | None = None
        if port is None:
            if options is not None:
                raise ValueError("webhook_options without a webhook_port: give both")
            return
        server = WebhookServer(
            self._webhooks,
            port=port,
            host=host,
            options=options,
            metrics=self.metrics.webhooks(),
            clock=self._clock,
            client=self._client,
        )
        self._webhook_server = server
        self._runnables.append((server, False))  # every replica serves
        self._readyz["webhook"] = server.ready

    @property
    def webhooks(self) -> Webhooks:
        """The registered webhooks (:class:`~kubereflector.runtime.webhooks.Webhooks`),
        which also generate their configurations; served only with a ``webhook_port``."""
        return self._webhooks

    @property
    def webhook_server(self) -> WebhookServer | None:
        """The webhook server (``None`` without a ``webhook_port``)."""
        return self._webhook_server

    @overload
    def validator(
        self, for_: type[T], **options: Unpack[ValidatorOptions]
    ) -> HandlerDecorator[T]: ...

    @overload
    def validator(
        self, for_: str | ApiResource, **options: Unpack[ValidatorOptions]
    ) -> HandlerDecorator[dict[str, Any]]: ...

    def validator(self, for_: Any, **options: Unpack[ValidatorOptions]) -> HandlerDecorator[Any]:
        """Register a validating webhook of ``for_`` (a model class, a resource name or an
        :class:`~kubereflector.models.ApiResource`): see :meth:`Webhooks.validator
        <kubereflector.runtime.webhooks.Webhooks.validator>`. Raises
        :class:`~kubereflector.runtime.ManagerError` once the manager runs."""
        self._check_new("webhooks")
        return self._webhooks.validator(for_, **options)

    @overload
    def defaulter(
        self, for_: type[T], **options: Unpack[DefaulterOptions]
    ) -> HandlerDecorator[T]: ...

    @overload
    def defaulter(
        self, for_: str | ApiResource, **options: Unpack[DefaulterOptions]
    ) -> HandlerDecorator[dict[str, Any]]: ...

    def defaulter(self, for_: Any, **options: Unpack[DefaulterOptions]) -> HandlerDecorator[Any]:
        """Register a mutating webhook of ``for_``: see :meth:`Webhooks.defaulter
        <kubereflector.runtime.webhooks.Webhooks.defaulter>`. Raises
        :class:`~kubereflector.runtime.ManagerError` once the manager runs."""
        self._check_new("webhooks")
        return self._webhooks.defaulter(for_, **options)

    def converter(
        self, hub: type[H], spoke: type[S], *, to_hub: Callable[[S], H], from_hub: Callable[[H], S]
    ) -> Conversion[H]:
        """Convert a multi-version kind's ``spoke`` version to and from its ``hub``: see
        :meth:`Webhooks.converter <kubereflector.runtime.webhooks.Webhooks.converter>`.
        Raises :class:`~kubereflector.runtime.ManagerError` once the manager runs."""
        self._check_new("webhooks")
        return self._webhooks.converter(hub, spoke, to_hub=to_hub, from_hub=from_hub)
