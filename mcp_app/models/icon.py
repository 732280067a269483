"""The IconImage model: an icon image uploaded to this site, stored by its SHA-256.

Catalog rows (and endpoints) name icons in their ``icons`` list; an uploaded one is named by
its path, ``/icons/<sha256>.<ext>`` (``mcp_app.services.icons``), so the lists stay small and
one image serves every row that uses it. Rows are never changed once written: the bytes are
the key.
"""

from __future__ import annotations

from django.db import models


class IconImage(models.Model):
    sha256 = models.CharField(max_length=64, primary_key=True)
    # Read from the bytes (magic numbers), never from the file name or the browser.
    mime_type = models.CharField(max_length=32)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.mime_type}, {self.width}x{self.height})"
