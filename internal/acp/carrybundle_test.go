package acp

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// carried is what a Carrier writes of msgs, each toward the client and
// recorded, by plug by (none when empty).
func carried(t testing.TB, by string, msgs ...string) string {
	t.Helper()
	out := &testsupport.Buffer{}
	c := NewCarrier(out, nil)
	for _, raw := range msgs {
		m := mustParse([]byte(raw))
		c.Record(ToClient, m, by)
		if err := c.Carry(m, true, WithNext); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// readBundled reads every message of a carried stream whose updates come
// in bundles with session as their sessionId: "kind: line" for each line
// read, bundles split into theirs, and a "---" after each message.
func readBundled(t testing.TB, stream io.Reader, session string) []string {
	t.Helper()
	r := NewCarriedReader(stream, 0)
	r.BundleUpdates(session)
	var got []string
	for {
		m, err := r.Next()
		var le *LineError
		switch {
		case errors.As(err, &le):
			got = append(got, "line error: "+le.Reason)
			continue
		case err == io.EOF:
			return got
		case err != nil:
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(m.Raw), "\n") {
			got = append(got, m.Kind.String()+": "+line)
		}
		got = append(got, "---")
		m.Release()
	}
}

// readToEnd reads r's messages until its stream ends; a read that fails
// fails the test.
func readToEnd(t testing.TB, r *Reader) []*Message {
	t.Helper()
	var msgs []*Message
	for {
		m, err := r.Next()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
}

// A server reads the session/updates of records that came one after the
// other as one message, a bundle its front end passes on as it is, with
// the session's id in each, where the session process recorded the
// agent's; whatever else the records carry is read as before, in order,
// and a bad line between them is skipped (M7).
func TestM7_ACarriedReaderBundlesTheUpdatesThatCameTogether(t *testing.T) {
	const blaise = "a-blaise-session-id-longer-than-the-agents"
	prompt := `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"ag-7","prompt":[]}}`
	answer := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	late := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"text":"d"},"sessionId":"ag-7"}}`
	escaped := `{"jsonrpc":"2.0","method":"session/update","params":{"session\u0049d":"ag-7","update":{}}}`
	noID := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{}}}`

	out := &testsupport.Buffer{}
	c := NewCarrier(out, nil)
	toClient := func(raw, by string) {
		m := mustParse([]byte(raw))
		c.Record(ToClient, m, by)
		_ = c.Carry(m, true, WithNext)
	}
	toClient(update("ag-7", "a"), "")
	toClient(update("ag-7", "b"), "logger") // a plug's: its name in the record's head
	c.Record(ToAgent, mustParse([]byte(prompt)), "")
	toClient(update("ag-7", "c"), "")
	toClient(answer, "")
	toClient(late, "")
	toClient(escaped, "")
	toClient(noID, "")
	_ = c.Carry(mustParse([]byte(update("ag-7", "e"))), false, Now) // replayed: no record
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}

	// A line that is no record, amid updates, is skipped (M7): the
	// updates on either side of it are read, in bundles of their own.
	lines := strings.SplitAfter(out.String(), "\n")
	stream := strings.Join(lines[:1], "") + "not a record\n" + strings.Join(lines[1:], "")
	got := readBundled(t, strings.NewReader(stream), blaise)
	want := []string{
		"bundle: " + update(blaise, "a"), "---",
		`line error: not a record: "not a record"`,
		"bundle: " + update(blaise, "b"), "---",
		"bundle: " + update(blaise, "c"), "---",
		"response: " + answer, "---",
		"bundle: " + strings.Replace(late, `"ag-7"`, `"`+blaise+`"`, 1),
		// Its key escaped, the sessionId is found as Parse finds it.
		"bundle: " + strings.Replace(escaped, `"ag-7"`, `"`+blaise+`"`, 1), "---",
		// No sessionId: read and checked as any message.
		"notification: " + noID, "---",
		"notification: " + update("ag-7", "e"), "---",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The session's id may be shorter than the agent's, or the same: each
// update is whole, and the bundle's lines are those of the updates.
func TestABundleOfCarriedUpdatesTakesAnIdOfAnyLength(t *testing.T) {
	for _, blaise := range []string{"s", "ag-7", strings.Repeat("x", 150)} {
		stream := carried(t, "", update("ag-7", "one"), update("ag-7", "two"))
		got := readBundled(t, strings.NewReader(stream), blaise)
		var want []string
		if len(blaise) > 100 {
			// Longer than the agent's by more than a record's head: the
			// moves would overwrite what is left of the message, so each
			// is read as any message.
			want = []string{"notification: " + update("ag-7", "one"), "---", "notification: " + update("ag-7", "two"), "---"}
		} else {
			want = []string{"bundle: " + update(blaise, "one"), "bundle: " + update(blaise, "two"), "---"}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("session %q: read\n%s\nwant\n%s", blaise, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A bundle holds at most maxBundle bytes, as one a session process writes:
// a long stream of updates comes in several, every update in order.
func TestACarriedBundleEndsAtMaxBundle(t *testing.T) {
	var msgs, want []string
	for i := range 3 * maxBundle / 1000 {
		text := strings.Repeat(string(rune('a'+i%26)), 900)
		msgs = append(msgs, update("ag-7", text))
		want = append(want, update("s-1", text))
	}
	r := NewCarriedReader(strings.NewReader(carried(t, "", msgs...)), 0)
	r.BundleUpdates("s-1")
	var got []string
	bundles := 0
	for _, m := range readToEnd(t, r) {
		if m.Kind != Bundle || len(m.Raw) >= maxBundle {
			t.Fatalf("a %s of %d bytes, want a bundle of less than %d", m.Kind, len(m.Raw), maxBundle)
		}
		bundles++
		got = append(got, strings.Split(string(m.Raw), "\n")...)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read %d updates, want the %d sent, in order", len(got), len(want))
	}
	if bundles < 3 {
		t.Errorf("%d bundles, want 3 or more", bundles)
	}
}

// A bundle is what has arrived: the reader does not wait for more.
func TestACarriedBundleDoesNotWaitForTheNextUpdate(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewCarriedReader(pr, 0)
	r.BundleUpdates("s-1")
	got := make(chan *Message)
	go func() {
		defer close(got)
		for {
			m, err := r.Next()
			if err != nil {
				return
			}
			got <- m
		}
	}()
	for _, texts := range [][]string{{"one", "two"}, {"three"}} {
		var msgs []string
		for _, text := range texts {
			msgs = append(msgs, update("ag-7", text))
		}
		go func() { _, _ = pw.Write([]byte(carried(t, "", msgs...))) }()
		m := <-got
		if want := strings.ReplaceAll(strings.Join(msgs, "\n"), `"ag-7"`, `"s-1"`); string(m.Raw) != want {
			t.Fatalf("read %q, want the bundle of what was written: %q", m.Raw, want)
		}
	}
	pw.Close()
	if m, ok := <-got; ok {
		t.Fatalf("read %q after the stream ended", m.Raw)
	}
}

// Whatever the ids and texts, the lines of the bundles are the updates
// recorded, with the session's id.
func FuzzCarriedBundlesAreTheUpdatesWithTheSessionsID(f *testing.F) {
	f.Add("ag-7", "s-1", "logger", "one\x00two\x00three")
	f.Add("", "a-much-longer-id", "", "\"quoted\\\"\x00\u2028")
	f.Add("ag\"7", "s", "p", "x")
	f.Fuzz(func(t *testing.T, agent, session, by, texts string) {
		var msgs, want []string
		for text := range strings.SplitSeq(texts, "\x00") {
			msg := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + string(jsonstr.Append(nil, agent)) + `,"update":{"text":` + string(jsonstr.Append(nil, text)) + `}}}`
			if _, err := Parse([]byte(msg)); err != nil {
				t.Skip(err) // jsonstr escapes what JSON needs: never
			}
			msgs = append(msgs, msg)
			want = append(want, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`+string(jsonstr.Append(nil, session))+`,"update":{"text":`+string(jsonstr.Append(nil, text))+`}}}`)
		}
		r := NewCarriedReader(strings.NewReader(carried(t, by, msgs...)), 0)
		r.BundleUpdates(session)
		var got []string
		for _, m := range readToEnd(t, r) {
			if m.Kind != Bundle {
				// Read as any message, with the agent's id.
				if string(m.Raw) != msgs[len(got)] {
					t.Fatalf("update %d read %q, want %q", len(got), m.Raw, msgs[len(got)])
				}
				got = append(got, want[len(got)])
				continue
			}
			got = append(got, strings.Split(string(m.Raw), "\n")...)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// The sessionId is found however the members are laid out, escaped or
// spaced, as Parse finds it; not outside params, or in params that are
// not an object.
func TestParamsSessionIDIsFoundWhereverItIs(t *testing.T) {
	for _, c := range []struct{ msg, id string }{
		{update("ag-7", "x"), `"ag-7"`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a\"b","update":{}}}`, `"a\"b"`},
		{`{ "jsonrpc": "2.0", "method": "session/update", "params": { "update": {"a": [1, "}"]}, "sessionId" : "s" } }`, `"s"`},
		{`{"params":{"sessionId":"s"},"jsonrpc":"2.0","method":"session/update"}`, `"s"`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"session\u0049d":"s"}}`, `"s"`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":7}}`, `7`},
		{`{"jsonrpc":"2.0","method":"session/update","params":[]}`, ""},
		{`{"jsonrpc":"2.0","method":"session/update","sessionId":"s","params":{}}`, ""},
	} {
		start, end, ok := paramsSessionID([]byte(c.msg))
		got := ""
		if ok {
			got = c.msg[start:end]
		}
		if got != c.id {
			t.Errorf("%s: found %q, want %q", c.msg, got, c.id)
		}
	}
}
