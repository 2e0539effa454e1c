package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// changesPages serve a session's changes: the diff its plugs' diff action
// shows (blaise:worktree's), and the merge, push and discard (end) of
// them. Actions run on the session's runner; the page that does one
// streams its output as it comes, with no script.
type changesPages struct {
	*site
	Actions Actions
}

// changesPage is what a session's changes page shows.
type changesPage struct {
	Record *lifecycle.Record
	Stat   string     // the diff's summary (diff --stat)
	Files  []diffFile // the diff
	Merge  bool       // offered
	Squash bool       // merge takes squash
	Push   bool       // offered
}

// diffFile is a file of a unified diff: its lines, each with its class
// (dmeta, dhunk, dadd, ddel, dctx), which keeps its +/− mark as text.
type diffFile struct {
	Path           string
	Added, Removed int
	Lines          []changeLine
}

type changeLine struct{ Class, Text string }

// pageActions are the actions a changes page does, with what their
// confirmation says.
var pageActions = map[string]struct{ button, detail string }{
	"merge": {"Merge", "Its work, committed and not, is merged into the branch it came from, in the repository's main checkout on its runner. A main checkout with uncommitted changes, or a conflict, refuses the merge, changing nothing."},
	"push":  {"Push", "Its branch is pushed to the remote, from its runner."},
}

// actionOffered finds the action a session offers by the name its plug gives
// it (NAME, or ID.NAME when several plugs offer NAME).
func actionOffered(ctx context.Context, a Actions, id, name string) (api.Action, bool) {
	if a == nil {
		return api.Action{}, false
	}
	list, err := a.SessionActions(ctx, id)
	if err != nil {
		return api.Action{}, false
	}
	for _, act := range list {
		if act.Name == name || strings.HasSuffix(act.Name, "."+name) {
			return act, true
		}
	}
	return api.Action{}, false
}

// changes shows a session's diff, its summary on top, and the actions on
// it; what keeps it from showing them (no runner, a run in progress, no
// diff offered) is said instead.
func (d *changesPages) changes(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	rec, err := d.Store.Session(r.Context(), id)
	if err != nil {
		d.noSession(w, u, id, err)
		return
	}
	p := d.pageFor(u, "Changes of session "+id)
	cp := changesPage{Record: rec}
	p.Data = &cp
	var list []api.Action
	if d.Actions != nil {
		list, err = d.Actions.SessionActions(r.Context(), id)
	}
	if err != nil {
		p.Error = err.Error()
		d.render(w, http.StatusServiceUnavailable, "changes.html", p)
		return
	}
	diff := ""
	for _, a := range list {
		switch a.Name[strings.LastIndex(a.Name, ".")+1:] {
		case "diff":
			diff = a.Name
		case "merge":
			cp.Merge = true
			for _, arg := range a.Args {
				cp.Squash = cp.Squash || arg.Name == "squash"
			}
		case "push":
			cp.Push = true
		}
	}
	if diff == "" {
		p.Error = "Session " + id + " offers no diff: " + notOffered(rec)
		cp.Merge, cp.Push = false, false
		d.render(w, http.StatusNotFound, "changes.html", p)
		return
	}
	var stat, full bytes.Buffer
	err = d.Actions.Act(r.Context(), id, diff, json.RawMessage(`{"stat":true}`), &stat)
	if err == nil {
		err = d.Actions.Act(r.Context(), id, diff, nil, &full)
	}
	if err != nil {
		p.Error = "The diff: " + err.Error()
		cp.Merge, cp.Push = false, false
		d.render(w, http.StatusConflict, "changes.html", p)
		return
	}
	cp.Stat, cp.Files = strings.TrimRight(stat.String(), "\n"), parseDiff(full.String())
	d.render(w, http.StatusOK, "changes.html", p)
}

// notOffered says why a session offers no diff.
func notOffered(rec *lifecycle.Record) string {
	if rec.State == lifecycle.Ended {
		return "it is ended, and its environment with it."
	}
	return "none of its plugs offers one (blaise:worktree does)."
}

func (d *changesPages) noSession(w http.ResponseWriter, u user, id string, err error) {
	if errors.Is(err, lifecycle.ErrNotFound) {
		p := d.pageFor(u, "No such session")
		p.Error = "Session " + id + " does not exist. Nothing was changed."
		d.render(w, http.StatusNotFound, "error.html", p)
		return
	}
	d.serverError(w, u, "reading the session", err)
}

// parseDiff splits a unified diff (git diff's) into its files.
func parseDiff(diff string) []diffFile {
	var files []diffFile
	inHunk := false
	for _, line := range strings.Split(strings.TrimRight(diff, "\n"), "\n") {
		if strings.HasPrefix(line, "diff --git ") || files == nil {
			path := line
			if i := strings.LastIndex(line, " b/"); i >= 0 {
				path = line[i+3:]
			}
			files, inHunk = append(files, diffFile{Path: path}), false
		}
		f := &files[len(files)-1]
		class := "dmeta"
		switch {
		case strings.HasPrefix(line, "@@"):
			class, inHunk = "dhunk", true
		case !inHunk:
		case strings.HasPrefix(line, "+"):
			class = "dadd"
			f.Added++
		case strings.HasPrefix(line, "-"):
			class = "ddel"
			f.Removed++
		case strings.HasPrefix(line, " "):
			class = "dctx"
		}
		f.Lines = append(f.Lines, changeLine{class, line})
	}
	if len(files) == 1 && len(files[0].Lines) == 1 && files[0].Lines[0].Text == "" {
		return nil // no changes
	}
	return files
}

// actionPage is what the page of an action done shows: its output,
// streamed where outputMark is, and how it went.
type actionPage struct {
	Record *lifecycle.Record
	Action string // merge, push
	Output template.HTML
	Done   bool
	Error  string
}

// outputMark is where an action's output goes in its page.
const outputMark = "<!--blaise:output-->"

// act does merge or push on a session once confirmed, and shows its
// output as it comes in a page of its own; an action refused before it
// began shows why, nothing changed.
func (d *changesPages) act(w http.ResponseWriter, r *http.Request, u user) {
	id, name := r.PathValue("id"), r.PathValue("action")
	rec, err := d.Store.Session(r.Context(), id)
	if err != nil {
		d.noSession(w, u, id, err)
		return
	}
	what, ok := pageActions[name]
	if !ok {
		p := d.pageFor(u, "Not done")
		p.Error = "The changes page does merge or push, not " + name + ". Nothing was changed."
		d.render(w, http.StatusNotFound, "error.html", p)
		return
	}
	action, ok := actionOffered(r.Context(), d.Actions, id, name)
	if !ok {
		p := d.pageFor(u, "Not done")
		p.Error = "Session " + id + " offers no " + name + " now (is its runner connected?). Nothing was changed."
		d.render(w, http.StatusConflict, "error.html", p)
		return
	}
	squash := r.PostFormValue("squash") == "yes"
	c := confirmation{Question: what.button + " the changes of session " + title(rec) + "?", Button: what.button,
		Detail: what.detail, Back: "/sessions/" + id + "/changes"}
	var args json.RawMessage
	if squash {
		c.Question = what.button + " the changes of session " + title(rec) + " as one commit?"
		c.Keep = map[string]string{"squash": "yes"}
		args = json.RawMessage(`{"squash":true}`)
	}
	if !d.confirmed(w, r, u, c) {
		return
	}
	// The form is read: the server's read timeout would cancel an action
	// that lasts longer.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	p := d.pageFor(u, what.button+": session "+id)
	ap := actionPage{Record: rec, Action: name, Output: outputMark}
	p.Data = &ap
	var page bytes.Buffer
	if err := d.pages["action.html"].Execute(&page, p); err != nil {
		d.serverError(w, u, "rendering the page", err)
		return
	}
	head, _, _ := strings.Cut(page.String(), outputMark)
	out := &pageOutput{w: w, head: head}
	err = d.Actions.Act(r.Context(), id, action.Name, args, out)
	ap.Done, ap.Output = true, ""
	if err != nil {
		ap.Error = err.Error()
		d.log().Warn("dashboard: an action failed", "session", id, "action", name, "user", u.Name, "err", err)
	} else {
		d.log().Info("dashboard: an action done", "session", id, "action", name, "user", u.Name)
	}
	if !out.started {
		// Refused before it began.
		d.render(w, http.StatusConflict, "action.html", p)
		return
	}
	if rec, err := d.Store.Session(r.Context(), id); err == nil {
		ap.Record = rec
	}
	page.Reset()
	ap.Output = outputMark
	if err := d.pages["action.html"].Execute(&page, p); err != nil {
		d.log().Error("dashboard: rendering a page", "page", "action.html", "err", err)
		return
	}
	_, tail, _ := strings.Cut(page.String(), outputMark)
	w.Write([]byte(tail))
}

// pageOutput writes an action's output into its page, escaped, as it
// comes; the page's head goes first, with the first output.
type pageOutput struct {
	w       http.ResponseWriter
	head    string
	started bool
}

func (o *pageOutput) Write(b []byte) (int, error) {
	if !o.started {
		o.started = true
		o.w.Header().Set("Content-Type", "text/html; charset=utf-8")
		o.w.Header().Set("Cache-Control", "no-store")
		o.w.WriteHeader(http.StatusOK)
		if _, err := o.w.Write([]byte(o.head)); err != nil {
			return 0, err
		}
	}
	// Escaped byte by byte: a character cut between writes stays whole.
	template.HTMLEscape(o.w, b)
	return len(b), http.NewResponseController(o.w).Flush()
}
