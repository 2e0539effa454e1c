package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// benchClient is an ACP client of the flood agent, reached either directly
// (the baseline), through `blaise-agent acp`, or through an engine in the
// benchmark's process.
type benchClient struct {
	in   io.Writer
	out  *bufio.Reader
	pid  int   // of the process the client talks to; 0: this one
	also []int // other processes of the path: the agent before a pipe hop
	// parts are groups of the path's processes whose CPU time is reported
	// apart.
	parts []part
	sid   string
	id    int
}

// startProcess starts cmd with a client reading its stdout and writing to
// the pipe that stdin returns (cmd's, or that of the process before it).
func startProcess(b testing.TB, cmd *exec.Cmd, stdin func() (io.WriteCloser, error)) *benchClient {
	b.Helper()
	cmd.Stderr = io.Discard
	in, err := stdin()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchClient{in: in, out: bufio.NewReaderSize(out, 1<<20), pid: cmd.Process.Pid}
	b.Cleanup(func() {
		in.Close()
		_, _ = io.Copy(io.Discard, c.out)
		_ = cmd.Wait()
	})
	c.open(b)
	return c
}

// open initializes and opens a session.
func (c *benchClient) open(b testing.TB) {
	c.request(b, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	c.sid = newSessionID(b, c.request(b, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, b.TempDir())))
}

// newSessionID is the session id of session/new's answer.
func newSessionID(b testing.TB, resp []byte) string {
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &r); err != nil || r.Result.SessionID == "" {
		b.Fatalf("session/new: %s", resp)
	}
	return r.Result.SessionID
}

// request sends a request and returns its answer; it fails on anything else
// that comes first.
func (c *benchClient) request(b testing.TB, method, params string) []byte {
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.id, method, params); err != nil {
		b.Fatal(err)
	}
	line, err := c.out.ReadSlice('\n')
	if err != nil {
		b.Fatalf("%s: %v", method, err)
	}
	if !bytes.Contains(line, []byte(fmt.Sprintf(`"id":%d,`, c.id))) {
		b.Fatalf("%s: got %s", method, line)
	}
	return line
}

// prompt sends a prompt of n updates; it returns once they and the answer
// were read.
func (c *benchClient) prompt(b *testing.B, n int) {
	if err := c.tryPrompt(n); err != nil {
		b.Fatal(err)
	}
}

// tryPrompt is prompt, which a goroutine of its own may call: it returns
// what went wrong.
func (c *benchClient) tryPrompt(n int) error {
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"%d"}]}}`+"\n", c.id, c.sid, n); err != nil {
		return err
	}
	for i := 0; i <= n; i++ {
		line, err := c.out.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("after %d of %d updates: %v", i, n, err)
		}
		if i == n && !bytes.Contains(line, []byte(`"stopReason":"end_turn"`)) {
			return fmt.Errorf("want the prompt's answer, got %.200s", line)
		}
	}
	return nil
}

// cpu returns the user and system CPU time that the processes of the path
// have used: the process the client talks to, its descendants (the session
// process and the agent), and the processes in c.also.
func (c *benchClient) cpu(b *testing.B) time.Duration {
	if c.pid == 0 {
		return 0
	}
	return cpuOf(b, append(descendants(c.pid), c.also...)...)
}

// cpuOf returns the user and system CPU time the processes have used.
func cpuOf(b *testing.B, pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Skip("no /proc: ", err)
		}
		// The fields after the command's name, which ends in ")": utime
		// and stime are the 12th and 13th, in clock ticks of 10 ms.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// part is a group of processes of a path, by the name of its metric.
type part struct {
	name string
	pids []int
}

// partsCPU returns the CPU time of each of c.parts.
func (c *benchClient) partsCPU(b *testing.B) []time.Duration {
	cpu := make([]time.Duration, len(c.parts))
	for i, p := range c.parts {
		cpu[i] = cpuOf(b, p.pids...)
	}
	return cpu
}

// descendants returns pid and the processes below it.
func descendants(pid int) []int {
	all := []int{pid}
	for _, child := range testsupport.Children(pid) {
		all = append(all, descendants(child)...)
	}
	return all
}

// pipeHop starts the flood agent with its output through cat (agent |
// cat): the cost of one plain pipe hop, the baseline of the others.
func pipeHop(b *testing.B) *benchClient {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	agent := exec.Command(exe)
	agent.Env = append(os.Environ(), "BLAISE_TEST_AGENT=flood")
	agent.Stderr = io.Discard
	in, err := agent.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	hop, err := agent.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = agent.Wait() })
	cat := exec.Command("cat")
	cat.Stdin = hop
	c := startProcess(b, cat, func() (io.WriteCloser, error) { return in, nil })
	c.also = []int{agent.Process.Pid}
	return c
}

// nodeProxy is the agent behind a proxy in Node.js with five handlers
// (testdata/nodeproxy): `acp` with 5 plugs is to stream at least three
// times its rate (docs/performance.md). Without node, it is skipped.
func nodeProxy(b *testing.B) *benchClient {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	proxy, err := filepath.Abs(filepath.Join("testdata", "nodeproxy", "proxy.mjs"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(node, proxy, exe)
	cmd.Env = append(os.Environ(), "BLAISE_TEST_AGENT=flood")
	return startProcess(b, cmd, cmd.StdinPipe)
}

// floodConfig writes a configuration of plugs no-op on_message plugs around
// the flood agent.
func floodConfig(b testing.TB, bin string, plugs int) (dir, path string) {
	dir = b.TempDir()
	path = filepath.Join(dir, "blaise.star")
	uses := acptest.NoopPlugs(b, dir, plugs)
	cfg := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"flood\"})\nsetup(%s)\n", bin, strings.Join(uses, ", "))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, path
}

// throughACP returns a start of `blaise-agent acp` (benchCommand), with a
// client on its stdio, for a configuration of plugs no-op on_message plugs.
func throughACP(plugs int) func(b *testing.B) *benchClient {
	return func(b *testing.B) *benchClient {
		dir, cfg := floodConfig(b, self(b), plugs)
		cmd := exec.Command(benchCommand(b), "acp", "-c", cfg, "--state-dir", filepath.Join(dir, "state"))
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
		return startProcess(b, cmd, cmd.StdinPipe)
	}
}

// throughEngine starts a run with an engine of this process, the client on
// Live.Stream, as `blaise-agent run` has it.
func throughEngine(b *testing.B) *benchClient {
	bin := self(b)
	dir, cfg := floodConfig(b, bin, 0)
	store, err := filestore.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		b.Fatal(err)
	}
	e := &engine.Engine{Store: store, Command: []string{bin, "session-process"}, Stderr: io.Discard, Log: log.New(io.Discard)}
	live, err := e.Start(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	r, w := live.Stream()
	c := &benchClient{in: w, out: bufio.NewReaderSize(r, 1<<20)}
	b.Cleanup(func() {
		_ = live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
		_, _ = live.Wait(context.Background())
		r.Close()
	})
	c.open(b)
	return c
}

// BenchmarkACPFrontEnd measures a client of `blaise-agent acp` (the front
// end, then the session process and its proxy) with no plugs and with 5
// no-op on_message plugs, against the same agent behind a plain pipe hop
// (agent | cat), in the same run. Throughput: one prompt, answered with b.N
// 1 KiB session/updates, which the client reads (MB/s, msgs/s, and x-pipe:
// the rate as a share of the pipe hop's last round; path-cpu: the CPU time
// of the processes between the client and the agent, and of the agent, per
// message; of `acp`, front-cpu and session-cpu: the front end's and the
// session process's). Latency: prompts answered at once, one at a time (median µs per
// round trip). $BLAISE_BENCH_BIN, when set, is the `blaise-agent` measured.
//
// x-pipe compares each round with a round of the pipe hop of as many
// messages, run right after it: the machine's speed drifts (another
// machine's work on a virtual one's host), and a baseline measured minutes
// before moved the ratio by half.
func BenchmarkACPFrontEnd(b *testing.B) {
	peers := []struct {
		name  string
		start func(b *testing.B) *benchClient
	}{
		{"pipe", pipeHop},
		{"engine", throughEngine},
		{"acp", throughACP(0)},
		{"acp-5plugs", throughACP(5)},
		{"node-5handlers", nodeProxy},
	}
	for _, p := range peers {
		b.Run("throughput/"+p.name, func(b *testing.B) {
			c := p.start(b)
			var baseline *benchClient
			if p.name != "pipe" {
				baseline = pipeHop(b)
			}
			b.SetBytes(int64(len(acptest.Update1KiB()) + 1))
			// Of `acp`'s path, the front end alone and the session
			// process alone (the front end's child, the agent's parent).
			var front, session []int
			if strings.HasPrefix(p.name, "acp") {
				front = []int{c.pid}
				if kids := testsupport.Children(c.pid); len(kids) == 1 {
					session = kids
				}
			}
			cpu0, front0, session0 := c.cpu(b), cpuOf(b, front...), cpuOf(b, session...)
			b.ResetTimer()
			c.prompt(b, b.N)
			b.StopTimer()
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "msgs/s")
			if c.pid != 0 {
				b.ReportMetric(float64(c.cpu(b)-cpu0)/float64(b.N), "path-cpu-ns/msg")
			}
			if len(session) > 0 {
				b.ReportMetric(float64(cpuOf(b, front...)-front0)/float64(b.N), "front-cpu-ns/msg")
				b.ReportMetric(float64(cpuOf(b, session...)-session0)/float64(b.N), "session-cpu-ns/msg")
			}
			if baseline != nil {
				b.ReportMetric(rate/baseline.rate(b, b.N), "x-pipe")
			}
		})
		b.Run("latency/"+p.name, func(b *testing.B) { roundTrips(b, p.start(b)) })
	}
}

// rate is the messages per second of a prompt of n updates.
func (c *benchClient) rate(b *testing.B, n int) float64 {
	t0 := time.Now()
	c.prompt(b, n)
	return float64(n) / time.Since(t0).Seconds()
}

// roundTrips sends b.N prompts answered at once, one at a time, and
// reports the median round trip.
func roundTrips(b *testing.B, c *benchClient) {
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c.prompt(b, 0)
		samples = append(samples, time.Since(t0))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "µs/roundtrip-median")
}
