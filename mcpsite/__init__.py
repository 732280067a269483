"""The mcphost Django project: settings, ASGI routing and the Celery app."""

from mcpsite.celery import app as celery_app

__all__ = ["celery_app"]
