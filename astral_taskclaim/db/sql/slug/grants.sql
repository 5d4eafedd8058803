-- The service role may call slug.slug().
GRANT USAGE ON SCHEMA slug TO {service_role};
