"""File names compared by one rule on every database: `name_folded` = NFC(casefold(NFD(name))).

The old constraint folded with SQL `LOWER()` (ASCII only on SQLite), so rows it let in may be
one name under the new rule; such a later row keeps its file and gets `name_folded` suffixed
with `/<id>` (a character no file name may hold), so the new constraint can be built and no
stored file is lost.
"""

import unicodedata

from django.db import migrations, models


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def backfill(apps, schema_editor):
    SubmissionFile = apps.get_model("submissions", "SubmissionFile")
    seen: set[tuple[str, str]] = set()
    rows = SubmissionFile.objects.order_by("submission_id", "uploaded_at", "id").only(
        "id", "submission_id", "filename"
    )
    for row in rows.iterator(chunk_size=2000):
        folded = _fold(row.filename)
        if (row.submission_id, folded) in seen:
            folded = f"{folded}/{row.pk}"
        seen.add((row.submission_id, folded))
        SubmissionFile.objects.filter(pk=row.pk).update(name_folded=folded)


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0002_submission_submissions_review_pending"),
    ]

    operations = [
        migrations.AddField(
            model_name="submissionfile",
            name="name_folded",
            field=models.CharField(default="", editable=False, max_length=1024),
            preserve_default=False,
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="submissionfile",
            name="submissions_submissionfile_unique_name_ci",
        ),
        migrations.AddConstraint(
            model_name="submissionfile",
            constraint=models.UniqueConstraint(
                fields=("submission", "name_folded"),
                name="submissions_submissionfile_unique_name_folded",
            ),
        ),
    ]
