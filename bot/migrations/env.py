"""Alembic's environment: migrations run on the connection `bot.migrations` hands over.

The bot's engines are async (aiosqlite, asyncpg); `bot.migrations` opens the connection, takes the
migration lock and calls Alembic inside `run_sync`, so this file only configures the context.
"""

from __future__ import annotations

from alembic import context

from bot.migrations.schema import target_metadata

connection = context.config.attributes.get("connection")
if connection is None:  # offline (`--sql`) mode: render the SQL for the dialect given by the URL
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata(),
        literal_binds=True,
        render_as_batch=True,
    )
else:
    # SQLite cannot ALTER most things in place: batch mode recreates a table where it has to.
    context.configure(
        connection=connection,
        target_metadata=target_metadata(),
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
with context.begin_transaction():
    context.run_migrations()
