# GradingAttempt now belongs to the `grading` app (its 0001 takes the table over in its state):
# removed from review's state only, the table and its rows stay.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("grading", "0001_initial"),
        ("review", "0002_gradingattempt_review_attempt_finished"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="GradingAttempt")],
            database_operations=[],
        ),
    ]
