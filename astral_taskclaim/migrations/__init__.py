"""The app's migrations: history, never rewritten.

Each migration that changes the database runs SQL of its own, a file of
``sql/`` named after it (``sql/0005_queue.sql``, undone by
``sql/0005_queue_reverse.sql``), through
:class:`~astral_taskclaim.db.operations.RunMigrationSQL`. The file is the
exact text the migration ran when it was released and is never edited after:
a database migrated then and one migrated today hold the same objects.
``sql/SHA256SUMS`` records each file's hash (``sha256sum -c SHA256SUMS``
checks them), and the test suite fails when a file no longer matches its
line. A schema change is a new migration with new files and new lines; the
schema all migrations build is ``db/sql/schema_reference.sql``, which a test
compares with a freshly migrated database.

How 0001-0008 were frozen. Until then the migrations ran the package's
current schema files (``taskclaim/schema.sql`` and so on), so each file here
is what its family's file held at the commit of ``main`` that added the
migration under its present name, byte for byte (``git show
<commit>:<path> | sha256sum`` gives the recorded hash): ``9d34913`` for
0001-0004, ``f5b1dfc`` for 0005, ``ab334fc`` for 0006 and ``d84ec0f`` for
0007-0008. Every database that has these migrations recorded ran exactly
that text or text with the same effect, so the frozen files keep each of
them correct:

- Edits after those commits changed no object. ``tasks/schema.sql`` was
  rewrapped (the header of ``taskclaim.delete_task_results``; its body, the
  only text PostgreSQL keeps, is unchanged) and the PostgreSQL 14-16 slug
  function was rewritten as an include of ``slug/schema.sql`` that expands to
  the same statement. A fresh ``migrate`` builds what they built.
- Edits before them happened under other names. ``worker_ids`` became
  ``jsonb`` (from ``text[]``) on the branch where the task results were
  migration ``0008_task_results``, before they reached ``main``; the outbox
  was ``0009_outbox`` there and the runs index ``0007_runs_index``. A
  database that ran those has names this graph lacks and must be migrated
  from zero; no database with ``0006_task_results`` recorded has a
  ``text[]`` column.

What a migration does not bake in: settings that may change after it ran.
``TASKCLAIM_SERVICE_ROLE``'s grants are applied after every ``migrate`` from
the current grants files (:mod:`astral_taskclaim.db.grants`), and the
results cleanup job is scheduled after every ``migrate`` with the
``TASKCLAIM_TASK_RESULTS_RETENTION`` then in force. ``TASKCLAIM_ADMIN_ROLE``
still applies while a migration runs: it says who runs the SQL (and so owns
what it creates), as the user running ``migrate`` does, not what is created.
"""

__all__ = []
