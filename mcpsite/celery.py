"""The Celery application; tasks are discovered in installed apps' ``tasks`` modules."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

app = Celery("mcpsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
