"""Every model over a table the app's SQL owns (db.sql_owned.SqlOwnedModel)
matches its table: the same columns, types and nullability."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection, models

from astral_taskclaim.db.sql_owned import SqlOwnedModel

pytestmark = pytest.mark.django_db

#: Tables only SQL reads and writes, with no model (the outbox has one now,
#: for the admin's list of the rows the relay set aside).
UNMODELLED: set[str] = set()


def sql_owned_models() -> list[type[models.Model]]:
    return [model for model in apps.get_models() if issubclass(model, SqlOwnedModel)]


def table_name(model: type[models.Model]) -> str:
    schema, _, table = model._meta.db_table.replace('"', "").partition(".")
    assert schema == "taskclaim", model
    return table


def columns(table: str) -> dict[str, tuple[str, bool]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull
               FROM pg_attribute a
               WHERE a.attrelid = ('taskclaim.' || quote_ident(%s))::regclass
                 AND a.attnum > 0 AND NOT a.attisdropped""",
            [table],
        )
        return {name: (type_, nullable) for name, type_, nullable in cursor.fetchall()}


def test_each_sql_owned_model_has_its_table_columns_types_and_nullability() -> None:
    found = {model.__name__: table_name(model) for model in sql_owned_models()}
    assert {"Claim", "QueueMessage", "ScheduleRecord", "StoredTaskResult"} <= set(found)
    for model in sql_owned_models():
        expected = {
            field.column: (field.db_type(connection), field.null)
            for field in model._meta.concrete_fields
        }
        assert columns(table_name(model)) == expected, model.__name__


def test_every_table_of_the_sql_has_a_model_or_is_known_to_have_none() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'taskclaim'")
        tables = {row[0] for row in cursor.fetchall()}
    modelled = {table_name(model) for model in sql_owned_models()}
    assert tables - modelled <= UNMODELLED
    assert tables >= UNMODELLED
