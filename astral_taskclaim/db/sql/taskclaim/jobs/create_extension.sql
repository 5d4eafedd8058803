-- Installs pg_cron where it runs in the app's own database (superusers only).
CREATE EXTENSION IF NOT EXISTS pg_cron
