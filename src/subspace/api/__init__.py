"""The HTTP API: an app factory, routes per resource and one error handler."""

from subspace.api.app import create_app

__all__ = ["create_app"]
