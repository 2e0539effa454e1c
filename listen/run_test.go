package listen

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/runnerproto"
	"github.com/charmbracelet/log"
)

// storeRun is a run with only a store, whose process's end is returned,
// and whose runner logs to logs.
func storeRun(t *testing.T, logs io.Writer) (*run, *os.File) {
	t.Helper()
	process, local, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { process.Close(); local.Close() })
	rn := &run{r: &Runner{Log: log.New(logs)}, ref: runnerproto.RunRef{Session: "sess", Run: 1},
		local: map[runnerproto.Channel]*os.File{runnerproto.ChannelStore: local}}
	return rn, process
}

// TestIssue13_AStoreAnswerTheRunnerCannotReadIsLogged: the relay stops at
// an answer line longer than the runner reads, and says so; a stream cut
// in the middle of an answer is not an error, and logs nothing.
func TestIssue13_AStoreAnswerTheRunnerCannotReadIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name, sent, want string
	}{
		{"a line too long", `{"id":1,"name":"` + strings.Repeat("x", 70<<10) + `"}` + "\n", "a line longer than"},
		{"a bad line", "not json\n", "a bad line"},
		{"a cut", `{"id":1,"ok":tr`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testsupport.Buffer
			rn, _ := storeRun(t, &logs)
			mine, theirs := net.Pipe()
			done := make(chan struct{})
			rn.store.Attach(rn.local[runnerproto.ChannelStore], mine, func(err error) {
				rn.storeEnded(err)
				close(done)
			})
			go func() {
				io.WriteString(theirs, tc.sent) // what is not read is left
				theirs.Close()
			}()
			<-done
			theirs.Close()
			got := logs.String()
			if tc.want == "" {
				if got != "" {
					t.Fatalf("a cut stream logged %q", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "sess") {
				t.Fatalf("the runner logged %q, want %q with the session", got, tc.want)
			}
		})
	}
}
