"""The plain job admission as one PostgreSQL function (apps/jobs/admission_function.py): the
policy's lock, the usage's count, the job's insert, the key's bind and the task's queue row in
one round trip, with their plans kept for the session. Written out as the module rendered it
(tests/jobs/test_admission_function.py compares the two). Nothing on SQLite."""

from django.db import migrations

from apps.core.plpgsql import on_postgresql

CREATE = """CREATE OR REPLACE FUNCTION jobs_admit_plain(integer, integer, integer, integer, double precision, character varying, character varying, timestamp with time zone, timestamp with time zone, timestamp with time zone, character varying, integer, character varying, character varying, jsonb, character varying, double precision, text, text, timestamp with time zone, timestamp with time zone, timestamp with time zone, character varying, bigint, character varying, timestamp with time zone, character varying, text, timestamp with time zone) RETURNS TABLE (o_max_concurrent integer, o_per_day integer, o_cost_limit double precision, o_storage bigint, o_boost integer, o_active bigint, o_last_day bigint, o_month_cost double precision, o_reserved bigint, o_inserted boolean, o_bound boolean) LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
  v_concurrent integer; v_per_day integer; v_cost double precision; v_storage bigint; v_boost integer;
  v_active bigint; v_last_day bigint; v_month_cost double precision; v_reserved bigint;
  v_base integer; v_limit integer; v_inserted boolean := false; v_bound boolean := false;
BEGIN
  SELECT "max_concurrent_jobs", "max_jobs_per_day", "monthly_cost_limit", "max_storage_bytes", "concurrent_boost" INTO v_concurrent, v_per_day, v_cost, v_storage, v_boost FROM "quotas_quotapolicy" WHERE "user_id" = $1 FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT (SELECT COUNT(*) FROM "jobs_job" WHERE "owner_id" = $1 AND "status" IN ($6, $7)), (SELECT COUNT(*) FROM "jobs_job" WHERE "owner_id" = $1 AND "created_at" > $8), (SELECT COALESCE(SUM("cost"), 0) FROM "jobs_job" WHERE "owner_id" = $1 AND "created_at" >= $9), (SELECT COUNT(*) FROM "quotas_reservation" WHERE "user_id" = $1 AND "consumed_at" IS NULL AND "released_at" IS NULL AND "expires_at" > $10) INTO v_active, v_last_day, v_month_cost, v_reserved;
  v_base := COALESCE(v_concurrent, $2);
  v_limit := CASE WHEN v_base <= 0 THEN 0 ELSE v_base + LEAST(GREATEST(0, v_boost), $3) END;
  IF v_last_day < COALESCE(v_per_day, $4) AND v_active + v_reserved < v_limit AND (COALESCE(v_cost, $5) IS NULL OR v_month_cost + $17 <= COALESCE(v_cost, $5)) THEN
    INSERT INTO "jobs_job" ("id", "owner_id", "submission_id", "status", "config", "resource_class", "cost", "logs", "error", "created_at", "started_at", "finished_at", "request_id") VALUES ($11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23);
    v_inserted := true;
    IF $24 IS NOT NULL THEN
      UPDATE "jobs_idempotencykey" SET "job_id" = $11, "lock_token" = '', "locked_at" = NULL, "expires_at" = $26 WHERE "id" = $24 AND "lock_token" = $25 AND "job_id" IS NULL;
      v_bound := FOUND;
    END IF;
    IF $27 IS NOT NULL THEN
      INSERT INTO "django_q_ormq" ("key", "payload", "lock") SELECT $27, $28, $29;
    END IF;
  END IF;
  RETURN QUERY SELECT v_concurrent, v_per_day, v_cost, v_storage, v_boost, v_active, v_last_day, v_month_cost, v_reserved, v_inserted, v_bound;
END
$body$"""

DROP = "DROP FUNCTION IF EXISTS jobs_admit_plain(integer, integer, integer, integer, double precision, character varying, character varying, timestamp with time zone, timestamp with time zone, timestamp with time zone, character varying, integer, character varying, character varying, jsonb, character varying, double precision, text, text, timestamp with time zone, timestamp with time zone, timestamp with time zone, character varying, bigint, character varying, timestamp with time zone, character varying, text, timestamp with time zone)"


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_request_id_job_jobs_queued_created"),
        ("quotas", "0003_quotapolicy_max_storage_bytes"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [on_postgresql([CREATE], [DROP])]
