package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// carriedLines splits what a Carrier wrote into its records and the
// messages they carry toward the client, as a server takes them apart.
func carriedLines(t *testing.T, out string) (records []Record, messages []string) {
	t.Helper()
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Fatalf("a line without its line break: %q", line)
		}
		rec, msg, err := CarriedLine([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if rec != nil {
			var r Record
			if err := json.Unmarshal(rec, &r); err != nil {
				t.Fatalf("record %q: %v", rec, err)
			}
			records = append(records, r)
		}
		if msg != nil {
			messages = append(messages, string(msg))
		}
	}
	return records, messages
}

// Each message toward the client leaves once, inside its record, and the
// record of a message toward the agent is written before Record returns:
// the transcript is what it is locally (M5), and the client gets every
// message in order.
func TestM5_CarriedRecordsHoldTheMessagesTowardTheClient(t *testing.T) {
	out := &testsupport.Buffer{}
	c := NewCarrier(out, nil)
	prompt := mustParse([]byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`))
	c.Record(ToAgent, prompt, "")
	if records, messages := carriedLines(t, out.String()); len(records) != 1 || len(messages) != 0 {
		t.Fatalf("once the prompt is recorded: %d records and %d messages, want its record and no message", len(records), len(messages))
	}
	// Messages read by a Reader are held in its blocks, not copied.
	stream := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","n":1}}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","n":2}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}` + "\n"
	r := NewReader(strings.NewReader(stream), 0)
	var sent []string
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		sent = append(sent, string(m.Raw))
		c.Record(ToClient, m, "")
		pace := WithNext
		if m.Kind == Response {
			pace = Now
		}
		if err := c.Carry(m, true, pace); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	records, messages := carriedLines(t, out.String())
	if strings.Join(messages, "\n") != strings.Join(sent, "\n") {
		t.Errorf("the client gets\n%s\nwant\n%s", strings.Join(messages, "\n"), strings.Join(sent, "\n"))
	}
	if len(records) != 4 {
		t.Fatalf("%d records, want 4", len(records))
	}
	for i, rec := range records {
		if rec.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i+1, rec.Seq)
		}
	}
	if records[0].Direction != "to_agent" || records[3].Direction != "from_agent" || records[3].Kind != "response" || string(records[3].Message) != sent[2] {
		t.Errorf("records %+v", records)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// History an agent replays while it loads a session is not recorded again
// (M5), and still reaches the client: alone, on a line of its own.
func TestM5_AMessageNotRecordedIsCarriedAlone(t *testing.T) {
	out := &testsupport.Buffer{}
	c := NewCarrier(out, nil)
	replayed := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`))
	if err := c.Carry(replayed, false, Now); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), string(CarriedForward)+string(replayed.Raw)+"\n"; got != want {
		t.Fatalf("carried %q, want %q", got, want)
	}
	records, messages := carriedLines(t, out.String())
	if len(records) != 0 || len(messages) != 1 || messages[0] != string(replayed.Raw) {
		t.Errorf("records %v, messages %q", records, messages)
	}
}

// The transcript is redacted with the run's secrets, and the client gets
// the message as the plugs left it: a record that redaction changes is
// stored redacted, apart from its message (blaise:secrets).
func TestARedactedRecordIsStoredApartFromItsMessage(t *testing.T) {
	const secret = "sk-live-0123456789"
	out := &testsupport.Buffer{}
	c := NewCarrier(out, func(b []byte) []byte {
		if !bytes.Contains(b, []byte(secret)) {
			return b
		}
		return bytes.ReplaceAll(b, []byte(secret), []byte("[REDACTED:key]"))
	})
	toClient := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"the key is ` + secret + `"}}`))
	c.Record(ToClient, toClient, "")
	if err := c.Carry(toClient, true, Now); err != nil {
		t.Fatal(err)
	}
	toAgent := mustParse([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"text":"use ` + secret + `"}}`))
	c.Record(ToAgent, toAgent, "")
	plain := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"nothing secret"}}`))
	c.Record(ToClient, plain, "")
	if err := c.Carry(plain, true, Now); err != nil {
		t.Fatal(err)
	}
	records, messages := carriedLines(t, out.String())
	if want := []string{string(toClient.Raw), string(plain.Raw)}; strings.Join(messages, "\n") != strings.Join(want, "\n") {
		t.Errorf("the client gets %q, want %q", messages, want)
	}
	if len(records) != 3 {
		t.Fatalf("%d records, want 3", len(records))
	}
	for _, rec := range records {
		if bytes.Contains(rec.Message, []byte(secret)) {
			t.Errorf("record %d holds the secret: %s", rec.Seq, rec.Message)
		}
	}
	if !bytes.Contains(records[0].Message, []byte("[REDACTED:key]")) || !bytes.Contains(records[1].Message, []byte("[REDACTED:key]")) {
		t.Errorf("records %s and %s are not redacted", records[0].Message, records[1].Message)
	}
	if lines := strings.Split(out.String(), "\n"); lines[0][0] != CarriedForward || lines[1][0] != CarriedStored || lines[2][0] != CarriedStored || lines[3][0] != '{' {
		t.Errorf("lines:\n%s", out.String())
	}
}

// A line that is neither a record nor tagged is refused with what it is;
// nothing is taken from it.
func TestCarriedLinesThatAreNotRecordsAreRefused(t *testing.T) {
	for _, line := range []string{
		``,
		`{"jsonrpc":"2.0","method":"session/update"}`,
		`{"seq":1,"time":"2026-01-05T10:00:00Z","kind":"notification","message":{}}`,
		`{"seq":1,"time":"2026-01-05T10:00:00Z","direction":"sideways","kind":"notification","message":{}}`,
		`{"seq":1,"time":"2026-01-05T10:00:00Z","direction":"from_agent","kind":"notification"}`,
		`={"seq":1}`,
		`x`,
	} {
		rec, msg, err := CarriedLine([]byte(line))
		if err == nil {
			t.Errorf("%q: taken apart as record %q and message %q, want an error", line, rec, msg)
		}
	}
}

// FuzzCarriedLine: whatever a runner sends, CarriedLine does not panic,
// and what it returns lies in the line.
func FuzzCarriedLine(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-01-05T10:00:00Z","direction":"from_agent","kind":"notification","method":"session/update","message":{"jsonrpc":"2.0","method":"session/update"}}`))
	f.Add([]byte(`={"seq":2,"time":"2026-01-05T10:00:00Z","direction":"to_agent","kind":"request","id":1,"message":{}}`))
	f.Add([]byte(`>{"jsonrpc":"2.0","method":"session/update"}`))
	f.Add([]byte(`{"seq":1,"time":"x","direction":"from_agent","message":}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, msg, err := CarriedLine(line)
		if err != nil {
			return
		}
		for _, part := range [][]byte{rec, msg} {
			if len(part) > len(line) || (len(part) > 0 && !bytes.Contains(line, part)) {
				t.Fatalf("%q: a part %q not in the line", line, part)
			}
		}
	})
}

// A server's engine reads the messages out of the carried lines where they
// lie: the records toward the agent and those stored apart are skipped,
// and a line that is not one a Carrier writes is a LineError (M7), after
// which the reader goes on.
func TestM7_ACarriedReaderReadsTheMessagesOfTheRecords(t *testing.T) {
	out := &testsupport.Buffer{}
	c := NewCarrier(out, func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte("sk-live-0123456789"), []byte("[REDACTED:key]"))
	})
	toAgent := mustParse([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`))
	update := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`))
	secret := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"key":"sk-live-0123456789"}}`))
	replayed := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"n":0}}`))
	c.Record(ToAgent, toAgent, "")
	for _, m := range []*Message{update, secret} {
		c.Record(ToClient, m, "")
		_ = c.Carry(m, true, WithNext)
	}
	_ = c.Carry(replayed, false, Now)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewCarriedReader(strings.NewReader(out.String()+"not a record\n"+string(CarriedForward)+string(update.Raw)+"\n"), 0)
	var got []string
	var lineErrs int
	for {
		m, err := r.Next()
		var lineErr *LineError
		if errors.As(err, &lineErr) {
			lineErrs++
			continue
		}
		if err != nil {
			break
		}
		got = append(got, string(m.Raw))
	}
	want := []string{string(update.Raw), string(secret.Raw), string(replayed.Raw), string(update.Raw)}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if lineErrs != 1 {
		t.Errorf("%d line errors, want 1 for the line that is not a record", lineErrs)
	}
}

// A message larger than what a Writer queues before it waits (4 MiB) is
// written at once, toward the agent and toward the client alike: nothing
// waits for a write that no one started.
func TestAMessageLargerThanTheQueueIsCarried(t *testing.T) {
	out := &testsupport.Buffer{}
	c := NewCarrier(out, nil)
	big := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", maxPending+1<<20) + `"}}`))
	done := make(chan struct{})
	go func() {
		c.Record(ToAgent, big, "")
		c.Record(ToClient, big, "")
		_ = c.Carry(big, true, Now)
		close(done)
	}()
	within := testsupport.Wait(func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if !within {
		t.Fatal("recording and carrying a message of 5 MiB did not return")
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if records, messages := carriedLines(t, out.String()); len(records) != 2 || len(messages) != 1 {
		t.Fatalf("%d records and %d messages, want 2 and 1", len(records), len(messages))
	}
}
