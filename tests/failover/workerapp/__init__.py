"""The app the failover tests' worker processes load: a claimed task and
a Django Task that record their runs in files, outside the database (see
:mod:`.tasks`)."""
