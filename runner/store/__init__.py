"""Where a run keeps what outlives it: the state folder, and the checkpointers (memory, SQLite,
PostgreSQL) that hold conversations.
"""
