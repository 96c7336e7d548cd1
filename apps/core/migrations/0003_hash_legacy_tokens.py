"""Move the clear-text keys of DRF's `authtoken` table into `ApiToken` as digests, then drop it.

Each old key keeps working (same string, same user) as a token named `migrated` holding every
scope its user's role allows: what the key could do before, no more (`read submit host`, plus
`review` for reviewers and staff, `admin` for staff). Then no table holds a usable key: the
`authtoken_token` table is dropped, and `rest_framework.authtoken` (no longer installed) is
forgotten by the migration history and the content types. A fresh database has no such table:
nothing to do. The digest scheme is the one of `apps.core.tokens` (written out here, so this
migration keeps its meaning whatever that module becomes).
"""

import datetime as dt
import hashlib
import uuid

from django.db import migrations

LEGACY_TABLE = "authtoken_token"


def _legacy_scopes(user, reviewer_ids):
    scopes = ["read", "submit", "host"]
    if user.is_staff or user.is_superuser or user.pk in reviewer_ids:
        scopes.insert(2, "review")
    if user.is_staff:
        scopes.append("admin")
    # The canonical order of apps.core.scopes.Scope.
    order = ["read", "submit", "review", "host", "admin"]
    return " ".join(s for s in order if s in scopes)


def _reviewer_ids(apps):
    User = apps.get_model("auth", "User")
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.filter(
        content_type__app_label="review", codename="can_review"
    ).first()
    if permission is None:
        return set()
    direct = set(User.objects.filter(user_permissions=permission).values_list("pk", flat=True))
    grouped = set(User.objects.filter(groups__permissions=permission).values_list("pk", flat=True))
    return direct | grouped


def hash_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
    if LEGACY_TABLE in tables:
        ApiToken = apps.get_model("core", "ApiToken")
        User = apps.get_model("auth", "User")
        reviewer_ids = _reviewer_ids(apps)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT key, user_id, created FROM {LEGACY_TABLE}")  # noqa: S608
            rows = cursor.fetchall()
        users = User.objects.in_bulk({user_id for _, user_id, _ in rows})
        for key, user_id, created in rows:
            user = users.get(user_id)
            if user is None:
                continue
            if isinstance(created, str):  # SQLite hands raw datetimes back as text
                created = dt.datetime.fromisoformat(created)
            if created.tzinfo is None:  # stored in UTC (USE_TZ)
                created = created.replace(tzinfo=dt.UTC)
            digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
            ApiToken.objects.create(
                id=uuid.uuid4().hex,
                user_id=user_id,
                name="migrated",
                key_id="x" + digest[:15],
                digest=digest,
                scopes=_legacy_scopes(user, reviewer_ids),
                created_at=created,
            )
        schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(LEGACY_TABLE)}")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0002_api_tokens"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop),
    ]
