#!/usr/bin/env python3
"""Writes pgbench scripts that run Muster's own PostgreSQL statements (read from its source, so
they stay the statements Muster runs), with pgbench variables where Muster binds parameters.

Usage: bench/pgbench-statements.py storage DIR
  DIR/muster.sql: the storage write statement (crates/muster/src/store/postgres/storage.rs), one
                  object of 200 bytes, last write wins, of a random owner (4,000) and key (4);
  DIR/bare.sql:   a bare upsert of the same row.
Usage: bench/pgbench-statements.py leaderboard DIR SCORES
  DIR/muster.sql: the leaderboard record write (crates/muster/src/store/postgres/leaderboards.rs),
                  operator `best` on a descending board `bench`, a score in [0, SCORES], of a
                  random owner out of 1,000,000,000 (most of them new: the insert half).
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def first_statement(path):
    text = open(os.path.join(ROOT, path)).read()
    marker = "const SQL: &'static str = \""
    start = text.index(marker) + len(marker)
    return text[start:text.index("\";", start)]


def substitute(statement, subs):
    """`statement` with Muster's bound parameters replaced by pgbench's variables and literals
    (the longest names first, so that $10 is not read as $1)."""
    for key in sorted(subs, key=len, reverse=True):
        statement = statement.replace(key, subs[key])
    if "$" in statement:
        sys.exit("a parameter of the statement has no substitute")
    return " ".join(statement.split())


def leaderboard(out, scores):
    subs = {
        "$1": "'bench'", "$2": "0", "$3": "md5(:n::text)::uuid", "$4": "'p'", "$5": ":score",
        "$6": "0", "$7": "NULL::text", "$8": "1::int2", "$9": "1",
    }
    statement = first_statement("crates/muster/src/store/postgres/leaderboards.rs")
    with open(os.path.join(out, "muster.sql"), "w") as f:
        f.write(f"\\set n random(1, 1000000000)\n\\set score random(0, {scores})\n"
                + substitute(statement, subs) + ";\n")


def storage(out):
    value = '{"v":"' + "x" * 190 + '"}'
    head = "\\set u random(1, 4000)\n\\set k random(0, 3)\n"
    subs = {
        "$10": "1", "$11": "10000", "$9": "false",
        "$1::text[]": "ARRAY['saves']", "$2::text[]": "ARRAY['k' || :k]",
        "$3::uuid[]": "ARRAY[md5(:u::text)::uuid]", "$4::text[]": f"ARRAY['{value}']",
        "$5::text[]": f"ARRAY[md5('{value}')]", "$6::text[]": "ARRAY['']",
        "$7::int2[]": "ARRAY[1::int2]", "$8::int2[]": "ARRAY[1::int2]",
    }
    statement = first_statement("crates/muster/src/store/postgres/storage.rs")
    with open(os.path.join(out, "muster.sql"), "w") as f:
        f.write(head + substitute(statement, subs) + ";\n")
    with open(os.path.join(out, "bare.sql"), "w") as f:
        f.write(head + "INSERT INTO storage (collection, key, user_id, value, version, read, write,"
                " create_time_ms, update_time_ms) VALUES ('saves', 'k' || :k, md5(:u::text)::uuid,"
                f" '{value}', md5('{value}'), 1, 1, 1, 1) ON CONFLICT (collection, key, user_id)"
                " DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version,"
                " update_time_ms = EXCLUDED.update_time_ms;\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "storage":
        storage(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "leaderboard":
        leaderboard(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
