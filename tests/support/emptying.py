"""Empty the test database between tests the cheap way, with the result Django's flush gives.

Django's ``flush`` (pytest-django's ``transactional_db`` after every test, and
``flush_database`` after every live-server module) truncates each of the ~90 tables and then
emits ``post_migrate``, which inserts every content type and permission again: most of a
transactional test's cost, for tables that were almost all empty. ``empty_database`` asks which
tables hold a row (one query), truncates only those, in one statement, and leaves the content
types and permissions alone when they are exactly as the last flush left them. Otherwise (a
test added, changed or removed one) it runs Django's flush, as before.

The call log's partitions count too: a test that dropped or added one gets the full flush,
whose ``post_migrate`` makes the days ahead again. Every table ends empty but those two, which
end as ``post_migrate`` makes them: what a test sees at its start is the same either way.
``tests/test_emptying.py`` holds it to that.
"""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connections

# The tables post_migrate fills (contenttypes, then auth's permissions): kept when unchanged.
MIGRATION_TABLES = ("django_content_type", "auth_permission")

# Per database: a digest of MIGRATION_TABLES as the last full flush (or migrate) left them.
_clean_digest: dict[str, str] = {}


def _digest(using: str) -> str:
    """A digest of every row of MIGRATION_TABLES (ids included: a re-created row differs), and
    of the partitions in the database (post_migrate makes the call log's days ahead)."""
    parts = [
        f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM {table} t"
        for table in MIGRATION_TABLES
    ]
    parts.append(
        "SELECT md5(coalesce(string_agg(name, ',' ORDER BY name), ''))"
        " FROM (SELECT inhrelid::regclass::text AS name FROM pg_inherits) AS partitions"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts))
        return ",".join(row[0] for row in cursor.fetchall())


def remember_clean_state(using: str = "default") -> None:
    """Record MIGRATION_TABLES as they are now, after migrate or a full flush."""
    _clean_digest[using] = _digest(using)


def tables_with_rows(using: str = "default") -> list[str]:
    """Django's tables (as ``flush`` lists them) that hold at least one row."""
    connection = connections[using]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    if not tables:
        return []
    quote = connection.ops.quote_name
    query = " UNION ALL ".join(
        f"SELECT {i} WHERE EXISTS (SELECT 1 FROM {quote(table)})" for i, table in enumerate(tables)
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        return [tables[row[0]] for row in cursor.fetchall()]


def empty_database(using: str = "default") -> None:
    """Leave the database as Django's ``flush`` would: every table empty, the content types
    and permissions as ``post_migrate`` makes them."""
    connection = connections[using]
    if connection.vendor != "postgresql" or using not in _clean_digest:
        _full_flush(using)
        return
    if _digest(using) != _clean_digest[using]:
        _full_flush(using)
        return
    # A second look: a live server may commit a row into a table the first look found empty
    # (Django's single TRUNCATE of every table left no such gap).
    for _look in range(2):
        written = [table for table in tables_with_rows(using) if table not in MIGRATION_TABLES]
        if not written:
            return
        # CASCADE: a table referencing one of these is truncated too, empty or not, as
        # PostgreSQL refuses otherwise; none of MIGRATION_TABLES references a table written
        # by tests, so they stay.
        statements = connection.ops.sql_flush(
            no_style(), written, reset_sequences=False, allow_cascade=True
        )
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)


def _full_flush(using: str) -> None:
    call_command("flush", interactive=False, verbosity=0, database=using)
    if connections[using].vendor == "postgresql":
        remember_clean_state(using)
