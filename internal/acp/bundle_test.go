package acp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// update is a session/update notification of session id, with text.
func update(id, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"text":%q}}}`, id, text)
}

// readAll reads every message of a checked Reader of stream, with the
// LineErrors met on the way.
func readAll(t *testing.T, stream string) (msgs []*Message, lineErrs []string) {
	t.Helper()
	r := NewCheckedReader(strings.NewReader(stream), 0)
	for {
		m, err := r.Next()
		var le *LineError
		switch {
		case errors.As(err, &le):
			lineErrs = append(lineErrs, le.Reason)
			continue
		case err == io.EOF:
			return msgs, lineErrs
		case err != nil:
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
}

func TestBundledLinesGoUnderOneHeadAndAreReadAsOneMessage(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.delay = time.Hour // a loaded machine's loop must not outlast the wait: the bundle is one
	blaiseID := []byte(`"blaise-1"`)
	var sent []string
	for i := range 3 {
		m := mustParse([]byte(update("agent-7", fmt.Sprint("chunk ", i))))
		if err := w.WriteBundled(m, m.SessionID(), blaiseID, WithNext); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, update("blaise-1", fmt.Sprint("chunk ", i)))
	}
	// A line that is not bundled closes the bundle; the next opens another.
	other := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	if err := w.Write([]byte(other)); err != nil {
		t.Fatal(err)
	}
	last := mustParse([]byte(update("blaise-1", "last")))
	if err := w.WriteBundled(last, nil, blaiseID, Now); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	first := strings.Join(sent, "\n") + "\n"
	want := fmt.Sprintf("+%d 3\n%s%s\n+%d 1\n%s\n", len(first), first, other, len(string(last.Raw))+1, last.Raw)
	if out.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", out.String(), want)
	}

	msgs, lineErrs := readAll(t, out.String())
	if len(lineErrs) > 0 {
		t.Fatalf("line errors: %v", lineErrs)
	}
	if len(msgs) != 3 {
		t.Fatalf("read %d messages, want 3 (bundle, response, bundle)", len(msgs))
	}
	if msgs[0].Kind != Bundle || msgs[0].Method != "session/update" || string(msgs[0].Raw)+"\n" != first {
		t.Errorf("first: kind %v method %q raw %q, want the bundle of %q", msgs[0].Kind, msgs[0].Method, msgs[0].Raw, first)
	}
	if msgs[1].Kind != Response || string(msgs[1].Raw) != other {
		t.Errorf("second: %v %q, want the response", msgs[1].Kind, msgs[1].Raw)
	}
	if msgs[2].Kind != Bundle || string(msgs[2].Raw) != string(last.Raw) {
		t.Errorf("third: %v %q, want a bundle of the last update", msgs[2].Kind, msgs[2].Raw)
	}

	// Passed on, a bundle is its lines, without the head.
	var again bytes.Buffer
	w2 := NewWriter(&again)
	for _, m := range msgs {
		if err := w2.WriteMessage(m, Behind); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := first + other + "\n" + string(last.Raw) + "\n"; again.String() != want {
		t.Errorf("passed on:\n%s\nwant\n%s", again.String(), want)
	}
}

func TestABundleEndsAtMaxBundle(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	line := update("s", strings.Repeat("x", 1000))
	n := 3 * maxBundle / (len(line) + 1)
	for range n {
		if err := w.WriteBundled(mustParse([]byte(line)), nil, nil, WithNext); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs, lineErrs := readAll(t, out.String())
	if len(lineErrs) > 0 {
		t.Fatalf("line errors: %v", lineErrs)
	}
	lines := 0
	for _, m := range msgs {
		if m.Kind != Bundle || len(m.Raw)+1 > maxBundle {
			t.Fatalf("a %v of %d bytes, want bundles of at most %d", m.Kind, len(m.Raw)+1, maxBundle)
		}
		lines += bytes.Count(m.Raw, []byte("\n")) + 1
	}
	if lines != n || len(msgs) < 3 {
		t.Errorf("%d lines in %d bundles, want %d lines in 3 or more", lines, len(msgs), n)
	}
}

func TestM7_BadBundleHeadsAreLineErrors(t *testing.T) {
	good := update("s", "ok") + "\n"
	for _, tc := range []struct{ name, stream, reason string }{
		{"not a number", "+x\n" + good, "not the head of a bundle"},
		{"zero", "+0\n" + good, "not the head of a bundle"},
		{"negative", "+-3\n" + good, "not the head of a bundle"},
		{"no count of lines", fmt.Sprintf("+%d\n%s", len(good), good), "not the head of a bundle"},
		{"no lines", fmt.Sprintf("+%d 0\n%s", len(good), good), "not the head of a bundle"},
		{"not whole lines", fmt.Sprintf("+%d 1\n%s", len(good)-1, good), "not of whole lines"},
		{"not a message", fmt.Sprintf("+%d 1\n%s", 3, "ab\n"), "not of whole lines"},
		{"cut short", fmt.Sprintf("+%d 1\n%s", len(good)+10, good), "cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := tc.stream + good
			if tc.name == "cut short" {
				stream = tc.stream
			}
			msgs, lineErrs := readAll(t, stream)
			if len(lineErrs) == 0 || !strings.Contains(lineErrs[0], tc.reason) {
				t.Errorf("line errors %q, want one saying %q", lineErrs, tc.reason)
			}
			// What follows a bad head is still read, unless the bundle
			// took it.
			if tc.name != "cut short" && (len(msgs) == 0 || string(msgs[len(msgs)-1].Raw)+"\n" != good) {
				t.Errorf("read %d messages after the bad head, want the good line last", len(msgs))
			}
		})
	}
}

func TestAnUncheckedReaderTakesNoBundles(t *testing.T) {
	good := update("s", "ok")
	r := NewReader(strings.NewReader(fmt.Sprintf("+%d 1\n%s\n", len(good)+1, good)), 0)
	var le *LineError
	if _, err := r.Next(); !errors.As(err, &le) {
		t.Fatalf("the head of a bundle from an agent: %v, want a LineError", err)
	}
	m, err := r.Next()
	if err != nil || m.Kind != Notification {
		t.Fatalf("the line after: %v %v, want the notification", m, err)
	}
}

func TestNextReadLeavesABundleNotArrivedWhole(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewCheckedReader(pr, 0)
	line := update("s", "ok") + "\n"
	head := fmt.Sprintf("+%d 2\n", 2*len(line))
	go func() { _, _ = io.WriteString(pw, head+line) }()
	// The head and the first line arrive in one read.
	r.fill()
	for r.end-r.start < len(head)+len(line) {
		r.fill()
	}
	if m, ok, err := r.NextRead(); ok || m != nil || err != nil {
		t.Fatalf("NextRead of half a bundle: %v %v %v, want nothing", m, ok, err)
	}
	go func() { _, _ = io.WriteString(pw, line); pw.Close() }()
	m, err := r.Next()
	if err != nil || m.Kind != Bundle || string(m.Raw)+"\n" != line+line {
		t.Fatalf("Next after the rest: %v %v, want the whole bundle", m, err)
	}
}

func TestProxyBundlesUpdatesWithTheClientsSessionID(t *testing.T) {
	var out bytes.Buffer
	p := &Proxy{ToClient: NewWriter(&out), ClientSession: []byte(`"blaise-1"`)}
	p.send(ToClient, mustParse([]byte(update("agent-7", "a"))), "")
	p.send(ToClient, mustParse([]byte(`{"jsonrpc":"2.0","method":"session/other","params":{"sessionId":"agent-7"}}`)), "")
	if err := p.ToClient.Flush(); err != nil {
		t.Fatal(err)
	}
	up := update("blaise-1", "a") + "\n"
	want := fmt.Sprintf("+%d 1\n%s", len(up), up) + `{"jsonrpc":"2.0","method":"session/other","params":{"sessionId":"agent-7"}}` + "\n"
	if out.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", out.String(), want)
	}
}

// The lines of a bundle count in the line numbers of the stream: a bad
// line after one is told by its own number.
func TestM7_ALineErrorAfterABundleHasTheLinesNumber(t *testing.T) {
	up := update("s", "a") + "\n"
	stream := fmt.Sprintf("+%d 3\n%s%s%s", 3*len(up), up, up, up) + "not json\n"
	r := NewCheckedReader(strings.NewReader(stream), 0)
	if m, err := r.Next(); err != nil || m.Kind != Bundle {
		t.Fatalf("the bundle: %v %v", m, err)
	}
	var le *LineError
	if _, err := r.Next(); !errors.As(err, &le) || le.Line != 5 {
		t.Fatalf("the bad line: %v, want a LineError of line 5 (the head, three lines, then it)", err)
	}
}

// A line as long as a bundle goes on its own, not bundled, so that a
// Reader whose lines may be as long as its limit still takes it.
func TestALineLongerThanABundleIsNotBundled(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	long := mustParse([]byte(update("agent-7", strings.Repeat("z", maxBundle))))
	if err := w.WriteBundled(long, long.SessionID(), []byte(`"b"`), Now); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := update("b", strings.Repeat("z", maxBundle)) + "\n"; out.String() != want {
		t.Fatalf("wrote %.80q…, want the line alone with the new id", out.String())
	}
}
