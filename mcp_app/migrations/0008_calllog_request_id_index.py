# The audit list filters and searches by request id (the X-Request-Id of the response).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_app", "0007_api_tokens"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="calllog",
            index=models.Index(fields=["request_id", "-id"], name="calllog_request_id"),
        ),
    ]
