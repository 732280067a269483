"""The write path, continued: upstreams and credentials, reverts and deletes.

``services/catalog_writes.py`` writes the catalog rows (endpoints, tools, resources, resource
templates, prompts); this module writes the rows they name, and gives every row kind its
revert and its delete, all inside the same ``writing`` block (the transaction, the history
stamps of ``actor`` and ``source``, and the one place a rule about who may write which rows
hooks in). The admin, the API and catalog import call these; none saves or deletes such a row
itself (``tests/services/test_catalog_writes.py`` checks).

- ``setting_row_save``: an upstream or a credential, checked (the model's ``full_clean``) and
  saved; a credential's new secret is set on it beforehand with
  ``services.credentials.credential_set_secret`` (encrypted; never logged or echoed).
- ``row_revert``: a row given back the values of one of its versions
  (``history.version_apply``), then saved by ``catalog_row_save`` or ``setting_row_save``, so
  a revert passes the same checks as an edit (a tool's name taken on its endpoint is
  refused).
- ``row_delete``: refused while ``services.references`` finds the row in use (the API's 409,
  the admin's protected list, import prune's error); the history's deletion row names who
  deleted. An upstream's users' OAuth connections are revoked at its authorization server
  once the delete commits (``connections.upstream_connections_revoke``: best effort, bounded
  time; a dry run or a refused import revokes nothing).
"""

from __future__ import annotations

import logging
from typing import cast

from django.db import models, transaction

from mcp_app.models import Credential, Prompt, RateLimit, Upstream
from mcp_app.services import history
from mcp_app.services.catalog_writes import Actor, CatalogRow, catalog_row_save, writing
from mcp_app.services.connections import upstream_connections_revoke
from mcp_app.services.references import ensure_unused

logger = logging.getLogger(__name__)

SettingRow = Upstream | Credential | RateLimit
Row = CatalogRow | SettingRow


def setting_row_save(row: SettingRow, *, actor: Actor, source: str | None) -> None:
    """Check ``row`` (an upstream, a credential or a rate limit, its new values set) and save
    it.

    A credential's new secret is set on it first by ``credential_set_secret`` (the admin form
    and the API serializer do), stored encrypted; a row holds no secret in clear.

    Raises:
        ValidationError: by field name; nothing was written.
    """
    with writing(row, actor=actor, source=source):
        row.full_clean()
        row.save()


def row_revert(row: Row, *, history_id: int, actor: Actor, source: str | None) -> None:
    """Give ``row`` the values of its version ``history_id`` (with its groups, a prompt's
    arguments and messages and an endpoint's items as of then), saved through the write path
    like any edit, so the same checks run.

    Raises:
        ObjectDoesNotExist: the row has no such version.
        ValidationError: the version names a row that is gone, or fails a check now; nothing
            was written.
    """
    with writing(row, actor=actor, source=source):
        record = type(row).history.get(id=row.pk, history_id=history_id)
        ids = history.version_apply(row=row, record=record)
        if isinstance(row, SettingRow):
            setting_row_save(row, actor=actor, source=source)
            return
        relations = {name: _rows(row, name, pks) for name, pks in ids.items()}
        catalog_row_save(row, actor=actor, source=source, relations=relations)
        if isinstance(row, Prompt):
            history.revert_prompt_parts(row, history_id)


def _rows(row: models.Model, name: str, pks: list[int]) -> list[models.Model]:
    model = cast(type[models.Model], row._meta.get_field(name).related_model)
    return list(model._default_manager.filter(pk__in=pks))


def row_delete(row: models.Model, *, actor: Actor, source: str | None) -> None:
    """Delete ``row`` (a catalog row, an upstream, a credential) unless something uses it;
    an upstream's users' connections are revoked at its authorization server once the delete
    commits.

    Raises:
        RowInUseError: ``services.references`` finds rows using it; nothing was deleted.
    """
    with writing(row, actor=actor, source=source):
        ensure_unused(row)
        if isinstance(row, Upstream):
            upstream_connections_revoke(row)
        label = f"{row._meta.verbose_name} {row}"
        row.delete()
        how = source or history.current_change_source()
        transaction.on_commit(lambda: logger.info("Deleted %s (%s)", label, how))
