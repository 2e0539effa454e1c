-- A transcript's lines are kept in a file per session, in the server's
-- transcript directory, as they were written; a chunk's row says where its
-- lines are in that file: file_size bytes from file_offset. A chunk stored
-- before (file_offset -1) holds its lines deflated in lines, and is read
-- as it was.

ALTER TABLE transcript_chunks ADD COLUMN file_offset BIGINT NOT NULL DEFAULT -1;
ALTER TABLE transcript_chunks ADD COLUMN file_size BIGINT NOT NULL DEFAULT 0;
