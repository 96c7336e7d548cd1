"""A rescore item's take and an entry's record as PostgreSQL functions
(apps/benchmarks/services/rescore_takes.py, rescore_records.py): one round trip each, and
their statements' plans kept for the session. Written out as the modules rendered them
(tests/benchmarks/test_rescore_functions.py compares them). Nothing on SQLite."""

from django.db import migrations

from apps.core.plpgsql import on_postgresql

TAKE = """CREATE OR REPLACE FUNCTION benchmarks_rescore_item_take(character varying, character varying, timestamp with time zone, bigint, character varying, integer, character varying, character varying, character varying, character varying, timestamp with time zone, boolean) RETURNS TABLE(item bigint, version integer, entry character varying, team character varying, submitted_at timestamp with time zone, kept_predictions character varying, phase character varying, kind character varying, final_selection integer, bundle_file character varying, bundle_sha256 character varying, filename character varying, storage_name character varying) LANGUAGE plpgsql VOLATILE AS $body$
#variable_conflict use_column
BEGIN
  IF $12 AND EXISTS (SELECT 1 FROM "jobs_job" WHERE "status" = 'queued' LIMIT 1) THEN
    RETURN NEXT;
    RETURN;
  END IF;
  RETURN QUERY WITH spent AS (UPDATE "benchmarks_rescoreitem" SET "status" = $1, "failure" = $2, "logs" = 'The worker was lost ' || CAST("attempts" AS text) || ' times while scoring.', "lease_expires_at" = NULL, "finished_at" = $3 WHERE "id" IN (SELECT "id" FROM "benchmarks_rescoreitem" WHERE "rescore_id" = $4 AND "status" = $5 AND "lease_expires_at" < $3 AND "attempts" >= $6 ORDER BY "id" LIMIT 8 FOR UPDATE SKIP LOCKED) AND "status" = $5 AND "lease_expires_at" < $3 AND "attempts" >= $6), pick AS (SELECT COALESCE((SELECT "id" FROM "benchmarks_rescoreitem" WHERE "rescore_id" = $4 AND "status" = $5 AND "lease_expires_at" < $3 AND "attempts" < $6 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED), (SELECT "id" FROM "benchmarks_rescoreitem" WHERE "rescore_id" = $4 AND "status" = $7 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED)) AS item FROM "benchmarks_rescore" WHERE "id" = $4 AND "state" IN ($8, $9)), taken AS (UPDATE "benchmarks_rescoreitem" SET "status" = $5, "lease_token" = $10, "lease_expires_at" = $11, "attempts" = "attempts" + 1 WHERE "id" = (SELECT item FROM pick) AND ("status" = $7 OR ("status" = $5 AND "lease_expires_at" < $3 AND "attempts" < $6)) RETURNING "id" AS item, "entry_id" AS entry, "rescore_id" AS rescore) SELECT taken.item, "benchmarks_rescore"."version", "benchmarks_entry"."submission_id", "benchmarks_entry"."team_id", "submissions_submission"."created_at", "benchmarks_entry"."kept_predictions", "benchmarks_phase"."id", "benchmarks_phase"."kind", "benchmarks_phase"."final_selection", "benchmarks_challenge"."bundle_file", "benchmarks_challenge"."bundle_sha256", "submissions_submissionfile"."filename", "submissions_submissionfile"."storage_name" FROM taken JOIN "benchmarks_rescore" ON "benchmarks_rescore"."id" = taken.rescore LEFT JOIN "benchmarks_entry" ON "benchmarks_entry"."submission_id" = taken.entry LEFT JOIN "submissions_submission" ON "submissions_submission"."id" = "benchmarks_entry"."submission_id" LEFT JOIN "benchmarks_phase" ON "benchmarks_phase"."id" = "benchmarks_entry"."phase_id" LEFT JOIN "benchmarks_challenge" ON "benchmarks_challenge"."id" = "benchmarks_phase"."challenge_id" LEFT JOIN "submissions_submissionfile" ON "submissions_submissionfile"."submission_id" = "submissions_submission"."id" ORDER BY "submissions_submissionfile"."uploaded_at", "submissions_submissionfile"."id";
  IF FOUND THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
END
$body$"""

RECORD = """CREATE OR REPLACE FUNCTION benchmarks_rescore_entry_record(bigint, character varying, character varying, character varying, text, timestamp with time zone, character varying, character varying, integer, character varying, character varying, character varying[], jsonb[], text[], text[], timestamp with time zone, timestamp with time zone, character varying, boolean, character varying[], character varying, boolean, boolean, integer) RETURNS text LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
  hidden_split character varying;
BEGIN
  UPDATE "benchmarks_rescoreitem" SET "status" = $3, "failure" = $4, "logs" = $5, "lease_expires_at" = NULL, "finished_at" = $6 WHERE "id" = $1 AND "status" = $7 AND "lease_token" = $2;
  IF NOT FOUND THEN
    RETURN 'lease_lost';
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  IF cardinality($12) = 0 THEN
    RETURN 'settled';
  END IF;
  PERFORM "id" FROM "benchmarks_team" WHERE "id" = $11 FOR UPDATE;
  INSERT INTO "benchmarks_score" ("phase_id", "version", "split", "entry_id", "team_id", "values", "metric_key", "order_key", "submitted_at", "created_at") SELECT $8, $9, v.split, $10, $11, v.vals, v.metric_key, v.order_key, $16, $17 FROM unnest($12, $13, $14, $15) AS v(split, vals, metric_key, order_key) ON CONFLICT ("entry_id", "version", "split") WHERE "entry_id" IS NOT NULL DO NOTHING;
  IF NOT FOUND THEN
    RETURN 'scored_before';
  END IF;
  INSERT INTO "benchmarks_teambest" ("phase_id", "version", "split", "team_id", "score_id", "metric_key", "order_key") SELECT "phase_id", "version", "split", "team_id", "id", "metric_key", "order_key" FROM "benchmarks_score" WHERE "entry_id" = $10 AND "version" = $9 AND ("split" = $18 OR $19) ON CONFLICT ("phase_id", "version", "split", "team_id") DO UPDATE SET "score_id" = excluded."score_id", "metric_key" = excluded."metric_key", "order_key" = excluded."order_key" WHERE "benchmarks_teambest"."order_key" > excluded."order_key";
  FOREACH hidden_split IN ARRAY $20 LOOP
    INSERT INTO "benchmarks_teambest" ("phase_id", "version", "split", "team_id", "score_id", "metric_key", "order_key") WITH eligible AS ( SELECT "benchmarks_entry"."submission_id" AS id, "benchmarks_entry"."final" AS is_final FROM "benchmarks_entry" JOIN "submissions_submission" ON "submissions_submission"."id" = "benchmarks_entry"."submission_id" WHERE "benchmarks_entry"."phase_id" = $8 AND "benchmarks_entry"."team_id" = $11 AND (("benchmarks_entry"."counted" AND "submissions_submission"."status" = $21) OR "benchmarks_entry"."submission_id" = $10)), pool AS (SELECT id FROM eligible WHERE is_final OR $22 UNION ALL SELECT * FROM (SELECT "entry_id" FROM "benchmarks_score" WHERE $23 AND NOT EXISTS (SELECT 1 FROM eligible WHERE is_final) AND "split" = $18 AND "phase_id" = $8 AND "version" = $9 AND "team_id" = $11 AND "entry_id" IN (SELECT id FROM eligible) ORDER BY "order_key" LIMIT $24) AS by_public) SELECT "phase_id", "version", "split", "team_id", "id", "metric_key", "order_key" FROM "benchmarks_score" WHERE "phase_id" = $8 AND "version" = $9 AND "split" = hidden_split AND "team_id" = $11 AND "entry_id" IN (SELECT id FROM pool) ORDER BY "order_key" LIMIT 1 ON CONFLICT ("phase_id", "version", "split", "team_id") DO UPDATE SET "score_id" = excluded."score_id", "metric_key" = excluded."metric_key", "order_key" = excluded."order_key";
    IF NOT FOUND THEN
      DELETE FROM "benchmarks_teambest" WHERE "phase_id" = $8 AND "version" = $9 AND "split" = hidden_split AND "team_id" = $11;
    END IF;
  END LOOP;
  RETURN 'recorded';
END
$body$"""

DROP_TAKE = "DROP FUNCTION IF EXISTS benchmarks_rescore_item_take(character varying, character varying, timestamp with time zone, bigint, character varying, integer, character varying, character varying, character varying, character varying, timestamp with time zone, boolean)"

DROP_RECORD = "DROP FUNCTION IF EXISTS benchmarks_rescore_entry_record(bigint, character varying, character varying, character varying, text, timestamp with time zone, character varying, character varying, integer, character varying, character varying, character varying[], jsonb[], text[], text[], timestamp with time zone, timestamp with time zone, character varying, boolean, character varying[], character varying, boolean, boolean, integer)"


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0007_rescore_item_next")]

    operations = [on_postgresql([TAKE, RECORD], [DROP_RECORD, DROP_TAKE])]
