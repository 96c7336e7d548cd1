# The table, its index and its check constraint take the grading app's names (rows kept).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("grading", "0001_initial"),
        ("review", "0003_gradingattempt_to_grading"),
    ]

    operations = [
        migrations.AlterModelTable(name="gradingattempt", table=None),
        migrations.RenameIndex(
            model_name="gradingattempt",
            new_name="grading_attempt_finished",
            old_name="review_attempt_finished",
        ),
        migrations.RemoveConstraint(
            model_name="gradingattempt",
            name="review_gradingattempt_outcome_valid",
        ),
        migrations.AddConstraint(
            model_name="gradingattempt",
            constraint=models.CheckConstraint(
                condition=models.Q(("outcome__in", ["running", "completed", "review_pending", "failed", "lease_lost", "abandoned"])),
                name="grading_gradingattempt_outcome_valid",
            ),
        ),
    ]
