-- The collation provider and locale that order taskclaim.claim.key (and so
-- its primary-key index). Read through to_jsonb so the query runs on
-- servers without pg_database.datlocprovider (before PostgreSQL 15).
SELECT
  CASE WHEN col.collprovider = 'd'
       THEN coalesce(to_jsonb(db) ->> 'datlocprovider', 'c')
       ELSE col.collprovider::text
  END AS provider,
  CASE WHEN col.collprovider = 'd'
       THEN db.datcollate::text
       ELSE col.collcollate::text
  END AS locale
FROM pg_catalog.pg_attribute AS att
JOIN pg_catalog.pg_collation AS col ON col.oid = att.attcollation
CROSS JOIN pg_catalog.pg_database AS db
WHERE att.attrelid = 'taskclaim.claim'::regclass
  AND att.attname = 'key'
  AND db.datname = current_database();
