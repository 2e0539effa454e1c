-- A transcript chunk keeps the run that appended its lines and the number
-- of the last store call of that run whose lines it holds (runstore): a
-- server that restarted skips an append a run sends again when the chunk
-- of its number is stored already. 0 for chunks written otherwise.

ALTER TABLE transcript_chunks ADD COLUMN run BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transcript_chunks ADD COLUMN last_call BIGINT NOT NULL DEFAULT 0;
CREATE INDEX transcript_chunks_run ON transcript_chunks (session_id, run, last_call);
