"""The words of each fact's text, for the facts that name a title new to the fabric

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 06:00:00

A document whose title the fabric has not seen links the facts that already name it (mention edges,
whichever came first). They were found by ``LIKE '%title%'`` over every text: a scan of the whole
fabric for each such document. ``fact_words`` holds each fact's words (``core.graph_rank.title_words``),
and the facts are found under the title's rarest word. Existing facts are indexed here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from crp_stream.core.graph_rank import title_words

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_BATCH = 5_000


def upgrade() -> None:
    op.create_table(
        "fact_words",
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.Column("fact_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("word", "fact_id", name=op.f("pk_fact_words")),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    words = sa.table("fact_words", sa.column("word"), sa.column("fact_id"))
    last = ""
    while True:
        rows = bind.execute(
            sa.text("SELECT fact_id, text FROM facts WHERE fact_id > :last ORDER BY fact_id LIMIT :n"),
            {"last": last, "n": _BATCH},
        ).fetchall()
        if not rows:
            return
        found = [{"word": w, "fact_id": f} for f, text in rows for w in title_words(text)]
        if found:
            bind.execute(words.insert(), found)
        last = rows[-1][0]


def downgrade() -> None:
    op.drop_table("fact_words")
