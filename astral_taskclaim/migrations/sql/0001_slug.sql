-- Schema `slug`: slug.slug(name), the URL slug of a name.
-- Lowercase letters and digits stay, spaces become `-`, everything else goes:
-- `O'Brien` gives `obrien`, `Room 52` gives `room-52`. Input is NFC-normalized
-- first, so composed and decomposed spellings agree. Case mapping and letter
-- classes come from the builtin `pg_c_utf8` collation (PostgreSQL 17+), so the
-- result does not depend on the database's or the argument's collation.
CREATE SCHEMA slug;

CREATE FUNCTION slug.slug(name text) RETURNS text
LANGUAGE SQL IMMUTABLE PARALLEL SAFE
RETURN replace(
  regexp_replace(
    lower(normalize(name, NFC) COLLATE pg_c_utf8),
    '[^[:alnum:] ]',
    '',
    'g'
  ),
  ' ',
  '-'
);

COMMENT ON FUNCTION slug.slug(text)
  IS 'URL slug of a name: NFC, lowercase alphanumerics, spaces as -.';
