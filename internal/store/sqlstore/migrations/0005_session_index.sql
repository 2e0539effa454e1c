-- Columns that copy more of a session's record, for the engine's sweeps and
-- the paged list (docs/server.md#store), with their indexes: due is when the
-- session at rest is next due (session.DueKey: Unix nanoseconds, 0 for
-- never); owner, runner and title as in the record. A row written before
-- has due NULL until the server that applied this migration copies its
-- record's fields (Open).

ALTER TABLE sessions ADD COLUMN due BIGINT;
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN runner TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_due ON sessions (due);
CREATE INDEX sessions_state_created ON sessions (state, created, id);
CREATE INDEX sessions_agent_created ON sessions (agent_name, created, id);
CREATE INDEX sessions_runner_created ON sessions (runner, created, id);
CREATE INDEX sessions_owner_created ON sessions (owner, agent_name, created, id);
