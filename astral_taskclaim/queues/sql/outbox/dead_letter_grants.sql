-- The relay records failed sends on the rows and sets refused ones aside.
GRANT UPDATE ON taskclaim.outbox TO {service_role};
