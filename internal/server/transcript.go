package server

import (
	"bufio"
	"io"
	"net/http"
	"strconv"

	"github.com/charmbracelet/log"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// transcriptFlush is how much of a transcript the API sends between
// flushes: a slow client holds the server's buffer, not the transcript.
const transcriptFlush = 1 << 20

// serveTranscript streams a session's transcript, its records one JSON
// object a line (docs/messages.md): the whole of it, or with ?after=N
// what chunks after the chunk numbered N hold. It reads up to the last
// chunk there is when it starts, which api.HeaderTranscriptNext gives.
func serveTranscript(w http.ResponseWriter, r *http.Request, store *sqlstore.Store, l *log.Logger) {
	id := r.PathValue("id")
	after := int64(0)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "?after= is the number of a transcript's chunk (a whole number), not %q", v)
			return
		}
		after = n
	}
	last, err := store.TranscriptLast(r.Context(), id)
	if err != nil {
		failErr(w, err)
		return
	}
	rd, err := store.TranscriptChunks(r.Context(), id, after, last)
	if err != nil {
		failErr(w, err)
		return
	}
	defer rd.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set(api.HeaderTranscriptNext, strconv.FormatInt(max(after, last), 10))
	out := bufio.NewWriterSize(w, 64<<10)
	rc := http.NewResponseController(w)
	for {
		_, err := io.CopyN(out, rd, transcriptFlush)
		if err == nil || err == io.EOF {
			if ferr := out.Flush(); ferr != nil {
				err = ferr
			} else if err == nil {
				err = rc.Flush()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			l.Debug("sending a transcript", "session", id, "err", err)
			return
		}
	}
}
