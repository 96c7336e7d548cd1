"""The phase's check at enqueue as one PostgreSQL function (apps/benchmarks/services/phase_count.py):
one round trip, and its statements' plans kept for the session. Written out as the module
rendered it (tests/benchmarks/test_phase_count_function.py compares the two). Nothing on SQLite."""

from django.db import migrations

from apps.core.plpgsql import on_postgresql

CREATE = """CREATE OR REPLACE FUNCTION benchmarks_entry_count_if_under(boolean, timestamp with time zone, character varying, integer, timestamp with time zone, timestamp with time zone, timestamp with time zone, boolean, character varying, character varying, date, boolean, character varying, character varying) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
  PERFORM t."id" FROM "benchmarks_team" t JOIN "benchmarks_entry" e ON e."team_id" = t."id" WHERE e."submission_id" = $3 FOR UPDATE OF t;
  UPDATE "benchmarks_entry" SET "counted" = $1, "counted_at" = $2, "refund_reason" = '' WHERE "submission_id" = $3 AND EXISTS (SELECT 1 FROM "benchmarks_teammember" m WHERE m."team_id" = "benchmarks_entry"."team_id" AND m."user_id" = $4) AND EXISTS (SELECT 1 FROM "benchmarks_phase" p WHERE p."id" = "benchmarks_entry"."phase_id" AND p."start" <= $5 AND (p."end" IS NULL OR $6 < p."end") AND ((p."limit_total" IS NULL AND p."limit_per_day" IS NULL AND p."limit_concurrent" IS NULL) OR EXISTS (SELECT 1 FROM (SELECT COUNT(*) AS total, COALESCE(SUM(CASE WHEN c."counted_at" >= $7 THEN 1 ELSE 0 END), 0) AS today FROM "benchmarks_entry" c WHERE c."phase_id" = "benchmarks_entry"."phase_id" AND c."team_id" = "benchmarks_entry"."team_id" AND c."counted" = $8) u, (SELECT COALESCE(SUM(CASE WHEN g."limit" = $9 THEN g."extra" ELSE 0 END), 0) AS total, COALESCE(SUM(CASE WHEN g."limit" = $10 AND g."day" = $11 THEN g."extra" ELSE 0 END), 0) AS today FROM "benchmarks_teamgrant" g WHERE g."team_id" = "benchmarks_entry"."team_id" AND g."phase_id" = "benchmarks_entry"."phase_id") g WHERE (p."limit_total" IS NULL OR u.total < p."limit_total" + g.total) AND (p."limit_per_day" IS NULL OR u.today < p."limit_per_day" + g.today) AND (p."limit_concurrent" IS NULL OR u.total < p."limit_concurrent" OR (SELECT COUNT(*) FROM "benchmarks_entry" a WHERE a."phase_id" = "benchmarks_entry"."phase_id" AND a."team_id" = "benchmarks_entry"."team_id" AND a."counted" = $12 AND EXISTS (SELECT 1 FROM "jobs_job" j WHERE j."submission_id" = a."submission_id" AND j."status" IN ($13, $14))) < p."limit_concurrent"))));
  RETURN FOUND;
END
$body$"""

DROP = "DROP FUNCTION IF EXISTS benchmarks_entry_count_if_under(boolean, timestamp with time zone, character varying, integer, timestamp with time zone, timestamp with time zone, timestamp with time zone, boolean, character varying, character varying, date, boolean, character varying, character varying)"


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0005_rescores_and_kept_predictions")]

    operations = [on_postgresql([CREATE], [DROP])]
