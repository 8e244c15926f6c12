#!/usr/bin/env python3
"""Writes pgbench scripts that run Muster's own PostgreSQL statements (read from its source, so
they stay the statements Muster runs), with pgbench variables where Muster binds parameters.

Usage: bench/pgbench-statements.py storage DIR
  DIR/muster.sql: the storage write statement (crates/muster/src/store/postgres/storage.rs), one
                  object of 200 bytes, last write wins, of a random owner (4,000) and key (4);
  DIR/bare.sql:   a bare upsert of the same row.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def first_statement(path):
    text = open(os.path.join(ROOT, path)).read()
    marker = "const SQL: &'static str = \""
    start = text.index(marker) + len(marker)
    return text[start:text.index("\";", start)]


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
    for key in sorted(subs, key=len, reverse=True):
        statement = statement.replace(key, subs[key])
    if "$" in statement:
        sys.exit("a parameter of the storage statement has no substitute")
    with open(os.path.join(out, "muster.sql"), "w") as f:
        f.write(head + " ".join(statement.split()) + ";\n")
    with open(os.path.join(out, "bare.sql"), "w") as f:
        f.write(head + "INSERT INTO storage (collection, key, user_id, value, version, read, write,"
                " create_time_ms, update_time_ms) VALUES ('saves', 'k' || :k, md5(:u::text)::uuid,"
                f" '{value}', md5('{value}'), 1, 1, 1, 1) ON CONFLICT (collection, key, user_id)"
                " DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version,"
                " update_time_ms = EXCLUDED.update_time_ms;\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "storage":
        sys.exit(__doc__)
    storage(sys.argv[2])
