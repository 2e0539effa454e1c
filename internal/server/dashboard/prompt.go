package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// promptSession sends the prompt box's text to a paused or live session
// through the dashboard's ACP client (a paused one resumes, L6), and
// shows the session's page, whose transcript follows the answer. A prompt
// that does not reach the session's run says why, and changes nothing.
func (d *sessionPages) promptSession(w http.ResponseWriter, r *http.Request, u user) {
	id, text := r.PathValue("id"), r.PostFormValue("text")
	notSent := func(why string) {
		d.sessionView(r.Context(), w, u, http.StatusConflict, id, "Nothing was sent: "+why, "", text, 0)
	}
	rec, err := d.Store.Session(r.Context(), id)
	switch {
	case err != nil:
		d.sessionView(r.Context(), w, u, http.StatusNotFound, id, "Nothing was sent: "+err.Error(), "", text, 0)
		return
	case strings.TrimSpace(text) == "":
		notSent("the prompt is empty.")
		return
	case rec.State != lifecycle.Active && rec.State != lifecycle.Paused:
		notSent("session " + id + " is " + string(rec.State) + "; only a paused or active session takes a prompt.")
		return
	}
	if err := d.client.prompt(r.Context(), rec.AgentName, id, text); err != nil {
		notSent(err.Error() + ".")
		return
	}
	d.log().Info("dashboard: prompt sent", "session", id, "user", u.Name)
	http.Redirect(w, r, "/sessions/"+id+"?"+url.Values{"prompted": {"1"}}.Encode(), http.StatusSeeOther)
}

// answerPermission answers a permission request waiting on a session's
// page with the option its button carries. A request that waits no more,
// or an option it does not offer, says so, and changes nothing.
func (d *sessionPages) answerPermission(w http.ResponseWriter, r *http.Request, u user) {
	id, req := r.PathValue("id"), r.PathValue("req")
	name, err := d.client.answer(id, req, r.PostFormValue("option"))
	if err != nil {
		d.sessionView(r.Context(), w, u, http.StatusConflict, id, "Nothing was answered: "+err.Error()+".", "", "", 0)
		return
	}
	d.log().Info("dashboard: permission request answered", "session", id, "request", req, "option", name, "user", u.Name)
	http.Redirect(w, r, "/sessions/"+id+"?"+url.Values{"answered": {"1"}}.Encode(), http.StatusSeeOther)
}

// cancelSession cancels the turn the page sent to a session (ACP
// session/cancel): the agent stops it, and its end shows in the
// conversation as cancelled.
func (d *sessionPages) cancelSession(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	if err := d.client.cancel(id); err != nil {
		d.sessionView(r.Context(), w, u, http.StatusConflict, id, "Nothing was cancelled: "+err.Error()+".", "", "", 0)
		return
	}
	d.log().Info("dashboard: turn cancelled", "session", id, "user", u.Name)
	http.Redirect(w, r, "/sessions/"+id+"?"+url.Values{"cancelled": {"1"}}.Encode(), http.StatusSeeOther)
}
