package server

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// getPlugLog answers a session's plug log: the lines its plugs logged
// (ctx.log), one JSON object a line, by run; with ?run=N, of that run.
func (res *resources) getPlugLog(w http.ResponseWriter, r *http.Request) {
	run := 0
	if v := r.URL.Query().Get("run"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, "run=%s: a run is a number from 1", v)
			return
		}
		run = n
	}
	id := r.PathValue("id")
	if _, err := res.Store.Session(r.Context(), id); err != nil {
		failErr(w, err)
		return
	}
	lines, err := res.Store.PlugLog(r.Context(), id)
	if err != nil {
		failErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for i := range lines {
		if run != 0 && lines[i].Run != run {
			continue
		}
		if err := enc.Encode(&lines[i]); err != nil {
			res.Log.Debug("sending a plug log", "session", id, "err", err)
			return
		}
	}
}
