# The call log partitioned by time on PostgreSQL (issue #30; docs/operations.md, "Call-log
# partitions"). SQLite keeps its plain table: nothing happens there.

from django.db import migrations


def partition_call_log(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from mcp_app.services.calllog.partitions import convert_to_partitioned

    convert_to_partitioned(using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    # The long steps (VALIDATE, CREATE INDEX CONCURRENTLY) run outside a transaction, so that
    # reads and writes go on; only the final swap holds a lock, for a few catalog changes.
    atomic = False

    dependencies = [
        ("mcp_app", "0029_icons"),
    ]

    operations = [
        # Backwards: the partitioned table has the same columns, so an older release works on
        # it as it is; nothing is undone.
        migrations.RunPython(partition_call_log, migrations.RunPython.noop, elidable=False),
    ]
