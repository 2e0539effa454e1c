package listen

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
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

// TestAStoreAnswerTheRunnerCannotReadIsLogged: the relay stops at
// an answer line longer than the runner reads, and says so; a stream cut
// in the middle of an answer is not an error, and logs nothing.
func TestAStoreAnswerTheRunnerCannotReadIsLogged(t *testing.T) {
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

// TestARunnersDefaultNameIsValidForAnyHostName: the name made of a host
// name is one the server accepts, and a host name that is one already
// keeps its name (and with it its credential file).
func TestARunnersDefaultNameIsValidForAnyHostName(t *testing.T) {
	for host, want := range map[string]string{
		"build-7":               "build-7",
		"Build-7.example.com":   "build-7",
		"MacBook-Pro.local":     "macbook-pro",
		"my_host":               "my-host",
		"_ci_":                  "ci-",
		"ünïcode":               "n-code",
		"":                      "runner",
		"...":                   "runner",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		got := DefaultName(host)
		if got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", host, got, want)
		}
		if err := lifecycle.CheckName("runner", got); err != nil {
			t.Errorf("DefaultName(%q): %v", host, err)
		}
	}
}
