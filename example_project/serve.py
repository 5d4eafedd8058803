#!/usr/bin/env python
"""``make serve``: the example project's admin at http://127.0.0.1:8000/admin/.

Migrates, makes sure the ``demo`` user exists (password ``demo``), runs a
worker for the ``refresh`` queue in a thread (so the rooms' "Refresh"
admin action runs its tasks), and serves until Ctrl-C or SIGTERM. The
embedded PostgreSQL stops when it exits, also after an earlier run was
killed outright (its PID is dropped from ``.pgdata/.handle_pids.json``).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADDRESS = os.environ.get("SERVE_ADDRESS", "127.0.0.1:8000")


def main() -> int:
    from astral_taskclaim.contrib.embedded_postgres import stop_on_sigterm

    # SIGTERM stops like Ctrl-C, so the embedded server stops too.
    stop_on_sigterm()
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from astral_taskclaim.worker.loop import Worker

    call_command("migrate", verbosity=0)
    if not get_user_model().objects.filter(username="demo").exists():
        get_user_model().objects.create_superuser("demo", password="demo")
    print(f"Log in at http://{ADDRESS}/admin/ as demo / demo (local use only).", flush=True)
    worker = Worker("refresh", wait=1.0)
    thread = threading.Thread(target=worker.run, name="refresh-worker", daemon=True)
    thread.start()
    try:
        call_command("runserver", ADDRESS, use_reloader=False)
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM before runserver took over: stop all the same
    finally:
        worker.stop()
        thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
