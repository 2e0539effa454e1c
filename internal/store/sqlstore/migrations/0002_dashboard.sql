-- The dashboard's people: local users with argon2id password hashes, their
-- signed-in web sessions (kept by the SHA-256 of the cookie's token), and
-- the one-time setup token that creates the first admin.

CREATE TABLE users (
	name     {{name}} PRIMARY KEY,
	password TEXT NOT NULL,
	admin    BIGINT NOT NULL DEFAULT 0,
	created  BIGINT NOT NULL
);

CREATE TABLE web_sessions (
	hash      {{bytes}} PRIMARY KEY,
	user_name {{name}} NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	created   BIGINT NOT NULL,
	expires   BIGINT NOT NULL
);

CREATE TABLE setup_tokens (
	hash    {{bytes}} PRIMARY KEY,
	created BIGINT NOT NULL
);
