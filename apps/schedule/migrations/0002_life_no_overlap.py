"""PostgreSQL only: an exclusion constraint forbidding two living Lives of one resource whose
guarded ranges intersect — the last line of defence behind the resource row lock. SQLite has
no equivalent; there the IMMEDIATE transaction plus the lock-based check keep bookings correct.
"""

from django.db import migrations

CREATE = """
CREATE EXTENSION IF NOT EXISTS btree_gist;
ALTER TABLE schedule_life ADD CONSTRAINT schedule_life_no_overlap
    EXCLUDE USING gist (
        resource_id WITH =,
        tstzrange(guard_start, guard_end, '[]') WITH &&
    ) WHERE (state IN ('Inexistent', 'Alive') AND resource_id <> '');
"""
DROP = "ALTER TABLE schedule_life DROP CONSTRAINT IF EXISTS schedule_life_no_overlap;"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("schedule", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
