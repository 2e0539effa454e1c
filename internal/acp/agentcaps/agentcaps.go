// Package agentcaps keeps a configuration's answer to initialize (the
// agent's capabilities, as the chain passed them on) in the state
// directory, so that `blaise-agent acp` answers a client's initialize with
// them at once, before any session starts; and learns it, once, by asking
// the configured agent alone when none is kept.
//
// An answer is kept per configuration and agent: the configuration's path,
// the agent's command line, environment and directory as agent(...) gives
// them, and the size and time of the agent's executable, so that an
// upgraded agent is asked again.
package agentcaps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// Dir is the directory of the kept answers in the state directory.
const Dir = "agents"

// An Agent is the agent process as a configuration's agent(...) gives it.
type Agent struct {
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
}

// Cache is the kept answer of one configuration and agent.
type Cache struct {
	path  string
	entry entry // of this configuration and agent, without an answer
	agent Agent
	limit time.Duration // of Learn's wait for the agent
}

// entry is the file of a kept answer: what it is of, for a person who
// reads it, and the answer.
type entry struct {
	Config  string          `json:"config"`
	Command []string        `json:"command"`
	Learned time.Time       `json:"learned,omitzero"`
	Result  json.RawMessage `json:"result,omitempty"`
	// Failed says why the agent could not be asked: it is not asked again
	// until a session of the configuration gives the answer.
	Failed string `json:"failed,omitempty"`
}

// Open returns the cache of configuration config (its absolute path) and
// agent a in the state directory stateDir. limit bounds Learn's wait for
// the agent (a session's startup limit).
func Open(stateDir, config string, a Agent, limit time.Duration) *Cache {
	argv := append([]string{a.Command}, a.Args...)
	key := struct {
		Config  string
		Argv    []string
		Env     []string
		Cwd     string
		Program string
	}{config, argv, envList(a.Env), a.Cwd, program(a)}
	data, _ := json.Marshal(key)
	sum := sha256.Sum256(data)
	return &Cache{
		path:  filepath.Join(stateDir, Dir, hex.EncodeToString(sum[:16])+".json"),
		entry: entry{Config: config, Command: argv},
		agent: a,
		limit: limit,
	}
}

// program identifies the agent's executable: its path, size and time,
// which change when it is upgraded; the command as written when it cannot
// be found.
func program(a Agent) string {
	path := a.Command
	if !strings.Contains(path, "/") {
		if p, err := exec.LookPath(path); err == nil {
			path = p
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return a.Command
	}
	return fmt.Sprintf("%s %d %d", path, fi.Size(), fi.ModTime().UnixNano())
}

func envList(env map[string]string) []string {
	var l []string
	for k, v := range env {
		l = append(l, k+"="+v)
	}
	slices.Sort(l)
	return l
}

// read returns the kept entry; a missing or unreadable file is none.
func (c *Cache) read() entry {
	var e entry
	if data, err := os.ReadFile(c.path); err == nil {
		_ = json.Unmarshal(data, &e)
	}
	return e
}

func (c *Cache) write(e entry) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(c.path, append(data, '\n'), 0o600, false)
}

// Known returns the kept answer; nil when there is none. tried tells
// whether the agent was asked already and could not answer: it is not
// asked again.
func (c *Cache) Known() (result []byte, tried bool) {
	e := c.read()
	return compact(e.Result), e.Failed != ""
}

// Keep keeps result, the chain's answer to initialize, unless it is what
// is kept already.
func (c *Cache) Keep(result []byte) error {
	e := c.read()
	if e.Result != nil && bytes.Equal(compact(e.Result), compact(result)) {
		return nil
	}
	e = c.entry
	e.Learned, e.Result = time.Now().UTC(), result
	return c.write(e)
}

func compact(data []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return data
	}
	return b.Bytes()
}

// Learn asks the agent, started alone (without the plugs, in this
// process's directory and environment with agent(...)'s), for its answer
// to initialize with the client's params, keeps it and gives it to
// answered, then stops the agent: whoever waits for the answer does not
// wait for the agent's end too. Learn returns once the agent has stopped.
// When the agent cannot answer, that is kept too (Known's tried), answered
// is not called, and the error says why.
func (c *Cache) Learn(ctx context.Context, clientParams []byte, answered func(result []byte)) error {
	var kept error
	err := c.ask(ctx, clientParams, func(result []byte) {
		kept = c.Keep(result)
		answered(result)
	})
	if err != nil {
		if ctx.Err() == nil {
			e := c.entry
			e.Failed = err.Error()
			err = errors.Join(err, c.write(e))
		}
		return err
	}
	return kept
}

// ask gives the agent's answer to got, before the agent is stopped.
func (c *Cache) ask(ctx context.Context, clientParams []byte, got func(result []byte)) error {
	ctx, cancel := context.WithTimeout(ctx, c.limit)
	defer cancel()
	host := hosts.NewLocal(hosts.LocalOptions{})
	defer host.Close()
	argv := append([]string{c.agent.Command}, c.agent.Args...)
	proc, err := host.Spawn(ctx, hosts.SpawnSpec{Argv: argv, Dir: c.agent.Cwd, Env: c.agent.Env})
	if err != nil {
		return fmt.Errorf("the agent failed to start: %w", err)
	}
	defer func() {
		_ = proc.Stdin().Close()
		_ = proc.Kill()
	}()
	// Both end with the agent's streams, once it is killed on return.
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	conn := client.NewConn(proc.Stdout(), proc.Stdin(), nil)
	go func() { _ = conn.Run(ctx) }()
	defer conn.Close()
	result, err := conn.Initialize(ctx, json.RawMessage(clientParams))
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the agent did not answer initialize within %v (the startup limit)", c.limit)
	case err != nil:
		return err
	}
	got(result)
	return nil
}
