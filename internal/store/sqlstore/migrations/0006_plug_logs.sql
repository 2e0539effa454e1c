-- The lines a session's plugs log (ctx.log), per run: each line's JSON
-- (lifecycle.PlugLogLine), numbered from 1 in its run. A line sent again
-- after a runner reconnects has the same run and seq, and is kept once.

CREATE TABLE plug_logs (
	session_id {{name}} NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	run        BIGINT NOT NULL,
	seq        BIGINT NOT NULL,
	line       TEXT NOT NULL,
	PRIMARY KEY (session_id, run, seq)
);
