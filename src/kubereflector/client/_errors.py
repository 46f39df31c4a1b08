"""``ConfigError``, raised by configuration loading and by credentials alike.

It sits below both :mod:`~kubereflector.client.config` (which loads a
:class:`~kubereflector.client.ClientConfig`) and :mod:`~kubereflector.client.auth`
(which obtains credentials), since each raises it and config builds on auth.
Import it from :mod:`kubereflector.client`.
"""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(Exception):
    """The configuration cannot be loaded, or credentials cannot be obtained.

    Raised by :func:`load_config` and :func:`in_cluster_config` (missing or
    malformed files, unknown contexts, unsupported settings), by
    ``Auth.authorize`` (an unreadable token file, a failing exec plugin or
    auth-provider) and by the Client's first request when TLS cannot load the
    certificate-authority data or the client certificate and key. The message
    says what is wrong and where; it never contains a credential, and the
    exception never chains one that could.
    """
