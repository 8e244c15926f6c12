"""Seeds a migrated Muster SQLite database with N links (random 7-character base62 codes, one
transaction per million rows) and writes a sample of their codes, one per line, for the load
generator. Usage: seed.py DB N SAMPLE_FILE SAMPLE_SIZE"""
import random
import sqlite3
import string
import sys
import time

db, count, sample_file, sample_size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
alphabet = string.digits + string.ascii_uppercase + string.ascii_lowercase
rng = random.Random(7352)
conn = sqlite3.connect(db)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA synchronous=OFF")
now = int(time.time() * 1000)
sample = []
done = 0
while done < count:
    chunk = min(1_000_000, count - done)
    rows = []
    for i in range(chunk):
        code = "".join(rng.choices(alphabet, k=7))
        n = done + i
        rows.append((code, f"https://game.example.com/invite/{n}?team={n % 4}", "key", 1, now))
        if len(sample) < sample_size and rng.random() < max(sample_size / count, 1e-9) * 1.2:
            sample.append(code)
    conn.executemany(
        "INSERT OR IGNORE INTO links (code, url, owner, reusable, create_time_ms) VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    conn.commit()
    done += chunk
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
conn.close()
with open(sample_file, "w") as f:
    f.write("\n".join(sample) + "\n")
