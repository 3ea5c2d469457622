from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0021_console_indexes"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="eventconsumer",
            options={
                "ordering": ["name"],
                "permissions": [("manage_consumers", "Can create and delete event consumers")],
            },
        ),
    ]
