package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/demoagent"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/charmbracelet/log"
)

func TestMain(m *testing.M) {
	if os.Getenv("BLAISE_TEST_AGENT") == "demo" {
		err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{StateDir: os.Getenv("DEMO_STATE"), Log: os.Stderr})
		var exit demoagent.ErrExit
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const agentPlaceholder = `agent(command = "blaise-agent", args = ["demo-agent"])`

type session struct {
	t       *testing.T
	dir     string
	run     *runner.Run
	done    chan runner.Result
	in      *io.PipeWriter
	msgs    chan *acp.Message
	logs    *syncBuffer
	records *syncBuffer
	rec     *acp.JSONLRecorder
}

func startFiles(t *testing.T, files map[string]string) *session {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if name == "blaise.star" {
			if !strings.Contains(text, agentPlaceholder) {
				t.Fatalf("blaise.star lacks %s", agentPlaceholder)
			}
			text = strings.Replace(text, agentPlaceholder, fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"demo\", \"DEMO_STATE\": %q})", os.Args[0], filepath.Join(dir, "demo-state")), 1)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncBuffer{}
	logger := log.NewWithOptions(logs, log.Options{Level: log.DebugLevel})
	cfg, err := runner.LoadConfig(filepath.Join(dir, "blaise.star"), logger)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, dir: dir, done: make(chan runner.Result, 1), in: inW, msgs: make(chan *acp.Message, 1024), logs: logs, records: &syncBuffer{}}
	s.rec = acp.NewJSONLRecorder(s.records)
	s.run = runner.New(runner.Options{
		Config:     cfg,
		SessionID:  "s1",
		Kind:       runner.Start,
		Logger:     logger,
		AgentGrace: time.Second,
		Client:     &runner.Client{In: acp.ReadMessages(inR, 0, logger), Out: acp.NewWriter(outW)},
		Recorder:   s.rec,
	})
	go func() {
		defer close(s.msgs)
		rd := acp.NewReader(outR, 0)
		for {
			m, err := rd.Next()
			var lineErr *acp.LineError
			if errors.As(err, &lineErr) {
				t.Errorf("the client got a line that is not a message: %v", lineErr)
				continue
			}
			if err != nil {
				_, _ = io.Copy(io.Discard, outR)
				return
			}
			s.msgs <- m
		}
	}()
	go func() {
		res := s.run.Run(context.Background())
		outW.Close()
		s.done <- res
	}()
	t.Cleanup(func() {
		s.run.Stop(runner.Stop{Reason: "closed"})
		inW.Close()
		go func() {
			for range s.msgs {
			}
		}()
		select {
		case res := <-s.done:
			s.done <- res
		case <-time.After(20 * time.Second):
			t.Error("the run did not end")
		}
	})
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

func (s *session) next() *acp.Message {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatalf("the client's stream ended\nlog:\n%s", s.logs)
		}
		return m
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no message for the client\nlog:\n%s", s.logs)
	}
	return nil
}

func (s *session) until(ok func(*acp.Message) bool) ([]*acp.Message, *acp.Message) {
	s.t.Helper()
	var before []*acp.Message
	for {
		m := s.next()
		if ok(m) {
			return before, m
		}
		before = append(before, m)
	}
}

func responseTo(id string) func(*acp.Message) bool {
	return func(m *acp.Message) bool { return m.Kind == acp.Response && string(m.ID) == id }
}

func (s *session) open() string {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}`)
	s.until(responseTo("1"))
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, s.dir))
	_, resp := s.until(responseTo("2"))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		s.t.Fatalf("session/new: %s", resp.Raw)
	}
	return r.SessionID
}

func (s *session) prompt(id int, sid, text string) {
	b, _ := json.Marshal(text)
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, id, sid, b))
}

func chunks(ms []*acp.Message) []string {
	var out []string
	for _, m := range ms {
		if m.Method != "session/update" {
			continue
		}
		var p struct {
			Update struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Update.Kind == "agent_message_chunk" {
			out = append(out, p.Update.Content.Text)
		}
	}
	return out
}
