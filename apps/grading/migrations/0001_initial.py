# GradingAttempt moves from the `review` app to `grading` without touching its rows: this
# migration adds the model to grading's state on the existing table `review_gradingattempt`
# (review 0003 removes it from review's state); 0002 then renames the table and its index and
# constraint. The content type moves too, so permissions granted on it are kept.

import django.db.models.deletion
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not content_type.objects.using(db).filter(app_label="grading", model="gradingattempt").exists():
        content_type.objects.using(db).filter(app_label="review", model="gradingattempt").update(
            app_label="grading"
        )


def move_content_type_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not content_type.objects.using(db).filter(app_label="review", model="gradingattempt").exists():
        content_type.objects.using(db).filter(app_label="grading", model="gradingattempt").update(
            app_label="review"
        )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0003_job_request_id_job_jobs_queued_created"),
        ("review", "0002_gradingattempt_review_attempt_finished"),
        ("submissions", "0002_submission_submissions_review_pending"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="GradingAttempt",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("number", models.PositiveIntegerField()),
                        ("lease_token", models.CharField(max_length=32, unique=True)),
                        ("lease_expires_at", models.DateTimeField()),
                        ("worker", models.CharField(blank=True, default="", max_length=200)),
                        ("grader", models.CharField(blank=True, default="", max_length=200)),
                        ("outcome", models.CharField(choices=[("running", "Running"), ("completed", "Completed"), ("review_pending", "Review pending"), ("failed", "Failed"), ("lease_lost", "Lease lost (result discarded)"), ("abandoned", "Abandoned (lease expired)")], default="running", max_length=20)),
                        ("exit_code", models.IntegerField(blank=True, null=True)),
                        ("score", models.FloatField(blank=True, null=True)),
                        ("reason", models.TextField(blank=True, default="")),
                        ("started_at", models.DateTimeField(auto_now_add=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("job", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="attempts", to="jobs.job")),
                        ("submission", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="grading_attempts", to="submissions.submission")),
                    ],
                    options={
                        "ordering": ["submission_id", "number"],
                        "db_table": "review_gradingattempt",
                        "indexes": [models.Index(fields=["finished_at"], name="review_attempt_finished")],
                        "constraints": [models.CheckConstraint(condition=models.Q(("outcome__in", ["running", "completed", "review_pending", "failed", "lease_lost", "abandoned"])), name="review_gradingattempt_outcome_valid")],
                    },
                ),
            ],
            database_operations=[
                migrations.RunPython(move_content_type, move_content_type_back),
            ],
        ),
    ]
