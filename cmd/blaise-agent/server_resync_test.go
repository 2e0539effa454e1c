package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// transcriptRecords reads a session's transcript from the server.
func (l *serverLab) transcriptRecords(id string) []acp.Record {
	l.t.Helper()
	req, _ := http.NewRequest("GET", l.url+"/v1/sessions/"+id+"/transcript", nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		l.t.Fatalf("transcript: %s %s", resp.Status, b)
	}
	var recs []acp.Record
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r acp.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			l.t.Fatalf("a transcript line %.200q: %v", sc.Bytes(), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		l.t.Fatal(err)
	}
	return recs
}

// gatedFlood writes flood.star: the flood agent behind a plug that holds
// the held-th update of the stream until the test opens the gate (a
// FIFO), then sets its persisted state to the count and logs it. ready
// is created once the update is held.
func (l *serverLab) gatedFlood(held int) (ready string, open func()) {
	t := l.t
	t.Helper()
	gate := filepath.Join(l.dir, "gate")
	ready = filepath.Join(l.dir, "ready")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	plug := fmt.Sprintf(`plug(name = "gate", persisted = schema.object(n = schema.int()))

def on_session(ctx, next):
    if ctx.persisted.value:
        ctx.log.info("stored updates=%%d" %% ctx.persisted.value.n)
    next()

def on_message(ctx, message, next):
    if message.method == "session/update":
        n = ctx.state.get("updates", 0) + 1
        ctx.state["updates"] = n
        if n == %d:
            ctx.host.exec(["sh", "-c", "echo > %s && read x < %s"], check = True)
            ctx.persisted.set({"n": n})
            ctx.log.info("persisted updates=%%d" %% n)
    return next(message)
`, held, ready, gate)
	if err := os.WriteFile(filepath.Join(l.dir, "gate.star"), []byte(plug), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"flood\"})\nsetup(use(\"./gate.star\", id = \"g\"))\n", l.bin)
	if err := os.WriteFile(filepath.Join(l.dir, "flood.star"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return ready, func() {
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("go\n")
		f.Close()
	}
}

// updatesIn counts the session/updates of ms.
func updatesIn(ms []*acp.Message) int {
	n := 0
	for _, m := range ms {
		if m.Method == "session/update" {
			n++
		}
	}
	return n
}

// onceEach fails unless the transcript of session id has each record of
// its run once, with updates session/updates among them.
func (l *serverLab) onceEach(id string, updates int) {
	t := l.t
	t.Helper()
	recs := l.transcriptRecords(id)
	seen := map[uint64]int{}
	streamed := 0
	for _, r := range recs {
		seen[r.Seq]++
		if r.Method == "session/update" {
			streamed++
		}
	}
	for seq := uint64(1); seq <= uint64(len(recs)); seq++ {
		if seen[seq] != 1 {
			t.Fatalf("transcript record %d is there %d times (of %d records)", seq, seen[seq], len(recs))
		}
	}
	if streamed != updates {
		t.Fatalf("the transcript has %d updates, want %d", streamed, updates)
	}
}

// TestStoreCallsSurviveABrokenConnectionMidTurn: the runner's
// connection goes silent, then breaks, while a turn streams and a plug's
// persisted write and transcript appends are on their way to the server.
// The run is adopted, the session process sends again what was not
// answered, and the turn completes; the next prompt is answered, the
// pause is reported, and the transcript has every record exactly once.
func TestStoreCallsSurviveABrokenConnectionMidTurn(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	const held = 500 // the update the plug holds while it writes
	ready, openGate := l.gatedFlood(held)
	proxy := newCutter(t, strings.TrimPrefix(l.url, "http://"))
	r := l.startRunnerVia("r1", "flood.star", proxy.url())
	testsupport.Eventually(t, "the runner connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	c, sid := l.open()
	const first = 3000
	c.Prompt(2, sid, fmt.Sprint(first))
	updates := 0
	for updates < held-1 {
		if m := c.Next(); m.Method == "session/update" {
			updates++
		}
	}
	// The plug holds the next update: what came before reached the client.
	testsupport.Eventually(t, "the plug holds an update", func() bool { _, err := os.Stat(ready); return err == nil })
	proxy.blackhole()
	openGate()
	// The persisted write goes into the black hole.
	testsupport.Eventually(t, "the run's store call is sent", func() bool { return proxy.swallowed.Load() >= 100 })
	proxy.cut()
	testsupport.Eventually(t, "the run is re-attached", func() bool { return strings.Contains(r.logs.String(), "run re-attached") })
	ms, resp := c.Until(acptest.ResponseTo("2"))
	updates += updatesIn(ms)
	if resp.Error != nil || updates != first {
		t.Fatalf("the turn after the reconnection: %d updates of %d, answer %s", updates, first, resp.Raw)
	}
	if !strings.Contains(r.logs.String(), "persisted updates=500") {
		t.Fatalf("the plug's persisted write did not return:\n%s", r.logs)
	}
	// The session goes on in the same run, and pauses when the client leaves.
	const second = 10
	ms, resp = c.Turn(3, sid, fmt.Sprint(second))
	next := updatesIn(ms)
	if resp.Error != nil || next != second {
		t.Fatalf("the next turn: %d updates of %d, answer %s", next, second, resp.Raw)
	}
	c.in.Close()
	_ = c.cmd.Wait()
	testsupport.Eventually(t, "the session pauses", func() bool { return l.sessions()[0].State == lifecycle.Paused })
	rec := l.sessions()[0]
	if rec.Runs != 1 || rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle || !rec.Pause.MayResume {
		t.Fatalf("paused: run %d, pause %+v; want run 1 paused idle", rec.Runs, rec.Pause)
	}
	l.onceEach(rec.ID, first+second)
}

// TestStoreCallsSurviveAServerRestartMidTurn: while a turn
// streams, a plug's persisted write is sent into a connection that went
// silent, and the server is killed without having read it. Once a new
// server runs on the same store, the runner reconnects, the run is taken
// back, the session process sends the write again and the turn completes:
// the next prompt is answered in the same run, the transcript has every
// record once, and the write is there when the session resumes.
func TestStoreCallsSurviveAServerRestartMidTurn(t *testing.T) {
	t.Parallel()
	// A lease the runner's reconnection fits in, under the race detector.
	l := newServerLab(t, "", 5*time.Second, "--idle-policy", "pause")
	const held = 1500
	ready, openGate := l.gatedFlood(held)
	addr := strings.TrimPrefix(l.url, "http://")
	proxy := newCutter(t, addr)
	r := l.startRunnerVia("r1", "flood.star", proxy.url())
	testsupport.Eventually(t, "the runner connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	c, sid := l.open()
	const first = 3000
	c.Prompt(2, sid, fmt.Sprint(first))
	// The updates before the one the plug holds reach the client first: the
	// server forwards an append's messages as it reads it, so it has read
	// the run's store stream up to the plug's write, and granted the stream
	// the room to send it. Until then, what the run sent before may still be
	// on its way (a stream held by its window), and the write would wait
	// behind it in a connection gone silent instead of going into it.
	for updates := 0; updates < held-1; {
		if m := c.Next(); m.Method == "session/update" {
			updates++
		}
	}
	testsupport.Eventually(t, "the plug holds an update", func() bool { _, err := os.Stat(ready); return err == nil })
	id := l.sessions()[0].ID
	proxy.blackhole()
	openGate()
	testsupport.Eventually(t, "the run's store call is sent", func() bool { return proxy.swallowed.Load() >= 100 })
	if err := l.serve.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = l.serve.Wait()
	_ = c.cmd.Wait() // acp --server ends with its connection
	reconnects := strings.Count(r.logs.String(), "connected server=")
	proxy.cut()
	l.startServer(addr)
	testsupport.Eventually(t, "the runner reconnects", func() bool { return strings.Count(r.logs.String(), "connected server=") > reconnects })
	testsupport.Eventually(t, "the server adopts the run", func() bool { return strings.Contains(l.logs.String(), "run adopted after a restart") })
	testsupport.Eventually(t, "the plug's persisted write returns", func() bool {
		return strings.Contains(r.logs.String(), fmt.Sprintf("persisted updates=%d", held))
	})
	// The turn's end is recorded: its answer is in the transcript.
	testsupport.Eventually(t, "the turn ends", func() bool {
		for _, rec := range l.transcriptRecords(id) {
			if rec.Kind == acp.Response.String() && string(rec.ID) == "2" && rec.Direction == acp.ToClient.Direction() {
				return true
			}
		}
		return false
	})
	c = l.client()
	c.Initialize(`{}`)
	c.LoadSession(3, sid, l.dir)
	c.Until(acptest.ResponseTo("3"))
	const second = 10
	ms, resp := c.Turn(4, sid, fmt.Sprint(second))
	next := updatesIn(ms)
	if resp.Error != nil || next != second {
		t.Fatalf("the turn after the restart: %d updates of %d, answer %s", next, second, resp.Raw)
	}
	c.in.Close()
	_ = c.cmd.Wait()
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })
	if rec := l.session(id); rec.Runs != 1 || rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle {
		t.Fatalf("paused: run %d, pause %+v; want run 1 paused idle", rec.Runs, rec.Pause)
	}
	l.onceEach(id, first+second)
	// The write made while the server was gone is the session's state.
	c = l.client()
	c.Initialize(`{}`)
	c.LoadSession(5, sid, l.dir)
	c.Until(acptest.ResponseTo("5"))
	if !strings.Contains(r.logs.String(), fmt.Sprintf("stored updates=%d", held)) {
		t.Fatalf("the resumed run does not have the persisted write:\n%s", r.logs)
	}
}
