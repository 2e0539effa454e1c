-- The first schema. {{bytes}} is BLOB on SQLite and BYTEA on PostgreSQL;
-- {{serial}} an auto-numbered BIGINT primary key; {{name}} text compared
-- and sorted byte by byte, as Go and the file store sort, whatever the
-- database's collation. Times are Unix
-- nanoseconds, 0 for never. A session's record is its JSON; the other
-- columns of sessions copy fields of it for queries.

CREATE TABLE sessions (
	id         {{name}} PRIMARY KEY,
	agent_name TEXT NOT NULL,
	state      TEXT NOT NULL,
	runs       BIGINT NOT NULL,
	created    BIGINT NOT NULL,
	updated    BIGINT NOT NULL,
	record     TEXT NOT NULL
);
CREATE INDEX sessions_created ON sessions (created, id);
CREATE INDEX sessions_agent_state ON sessions (agent_name, state);

CREATE TABLE persisted (
	session_id {{name}} NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	plug_id    {{name}} NOT NULL,
	plug_name  TEXT NOT NULL,
	sealed     {{bytes}} NOT NULL,
	PRIMARY KEY (session_id, plug_id)
);

CREATE TABLE transcript_chunks (
	seq        {{serial}},
	session_id {{name}} NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	lines      {{bytes}} NOT NULL -- deflated (RFC 1951)
);
CREATE INDEX transcript_chunks_session ON transcript_chunks (session_id, seq);

CREATE TABLE agents (
	name     {{name}} PRIMARY KEY,
	config   TEXT NOT NULL,
	settings TEXT NOT NULL,
	created  BIGINT NOT NULL,
	updated  BIGINT NOT NULL
);

CREATE TABLE registration_tokens (
	id        {{name}} PRIMARY KEY,
	hash      {{bytes}} NOT NULL UNIQUE,
	created   BIGINT NOT NULL,
	expires   BIGINT NOT NULL,
	used      BIGINT NOT NULL DEFAULT 0,
	runner_id TEXT NOT NULL DEFAULT ''
);

CREATE TABLE runners (
	id        {{name}} PRIMARY KEY,
	name      {{name}} NOT NULL,
	cred_hash {{bytes}} NOT NULL UNIQUE,
	created   BIGINT NOT NULL,
	last_seen BIGINT NOT NULL,
	revoked   BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE api_tokens (
	id        {{name}} PRIMARY KEY,
	name      {{name}} NOT NULL,
	hash      {{bytes}} NOT NULL UNIQUE,
	created   BIGINT NOT NULL,
	last_used BIGINT NOT NULL DEFAULT 0,
	revoked   BIGINT NOT NULL DEFAULT 0
);
