"""How a gate was decided, the permission to override a gate's rule, and every gate
carrying its rule from the run's start.

A gate used to receive its permission and assignees only when entered, so a gate not
yet reached looked open to anyone; skipping such a gate is now checked against its rule,
so the rule of gates already created and not yet entered is filled in here from their
registered definitions (a gate whose definition is gone cannot be skipped: its run
refuses every verb that needs the definition).
"""

from django.db import migrations, models

NOT_ENTERED = ("pending", "ready")


def fill_gate_rules(apps, schema_editor):
    from workflows.definitions import Gate, registry
    from workflows.errors import DefinitionMissing

    Step = apps.get_model("workflows", "Step")
    gates = Step.objects.using(schema_editor.connection.alias).filter(
        kind=Gate.kind, status__in=NOT_ENTERED
    )
    for step in gates.select_related("run").iterator():
        try:
            workflow = registry.get(step.run.workflow_name, step.run.workflow_version)
        except DefinitionMissing:
            continue
        node = workflow.nodes.get(step.name)
        if isinstance(node, Gate):
            for field, value in node.step_columns().items():
                setattr(step, field, value)
            step.version += 1
            step.save(update_fields=[*node.step_columns(), "version"])


def fill_decided_via(apps, schema_editor):
    Step = apps.get_model("workflows", "Step")
    decided = Step.objects.using(schema_editor.connection.alias).exclude(decision="")
    decided.filter(decided_by__isnull=True).update(
        decided_via="timeout", version=models.F("version") + 1
    )
    decided.filter(decided_by__isnull=False).update(
        decided_via="decision", version=models.F("version") + 1
    )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0012_routing_and_limits"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="step",
            options={
                "ordering": ["id"],
                "permissions": [
                    (
                        "override_gate_claim",
                        "Can decide or release a gate claimed by someone else",
                    ),
                    (
                        "override_gate_rule",
                        "Can skip a gate whose own rule does not admit them (recorded as an "
                        "override)",
                    ),
                ],
            },
        ),
        migrations.AddField(
            model_name="step",
            name="decided_via",
            field=models.CharField(
                blank=True,
                choices=[
                    ("decision", "decided"),
                    ("timeout", "decided by its timeout"),
                    ("skip", "skipped by a decider"),
                    ("override", "skipped, overriding the gate's rule"),
                ],
                default="",
                max_length=16,
            ),
        ),
        migrations.RunPython(fill_gate_rules, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(fill_decided_via, migrations.RunPython.noop, elidable=True),
    ]
