-- Undoes slug/schema.sql. No CASCADE: a column default or index still using
-- slug.slug() must be dropped by its own migration first.
DROP FUNCTION slug.slug(text);
DROP SCHEMA slug;
