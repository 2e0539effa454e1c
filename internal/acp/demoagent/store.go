package demoagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
	"github.com/blaiseagent/blaise-agent/internal/support/safename"
)

// Layout of the state directory:
//
//	<StateDir>/next-session            hint for the next session number ("7\n")
//	<StateDir>/sessions/<id>.json      one file per session (sessionFile)
//
// Session ids are "sess-<n>". A number is claimed by creating its session
// file with O_EXCL, so concurrent processes sharing a StateDir never hand out
// the same id; next-session only saves them from probing from 1 every time.

const (
	sessionsDirName = "sessions"
	counterFileName = "next-session"
	fileVersion     = 1
	maxIDProbes     = 1 << 20
)

// errSessionNotFound is returned by store.load for an unknown session id.
var errSessionNotFound = errors.New("session not found")

// sessionFile is the JSON document stored for each session.
type sessionFile struct {
	Version   int    `json:"version"`
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	// NextToolCall numbers the session's tool calls ("call-<n>") across
	// processes, so that ids stay unique in a loaded session.
	NextToolCall int `json:"nextToolCall"`
	// History holds the session/update payloads ("update" objects) of every
	// completed turn, in the order they were sent, the user's prompt blocks
	// included as user_message_chunk updates.
	History []json.RawMessage `json:"history"`
}

type store struct {
	dir string
}

func (s *store) sessionsDir() string { return filepath.Join(s.dir, sessionsDirName) }

func (s *store) path(id string) string {
	return filepath.Join(s.sessionsDir(), id+".json")
}

func (s *store) init() error {
	return os.MkdirAll(s.sessionsDir(), 0o700)
}

// readCounter returns the next session number hint (at least 1).
func (s *store) readCounter() int {
	b, err := os.ReadFile(filepath.Join(s.dir, counterFileName))
	if err != nil {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func (s *store) writeCounter(n int) error {
	return atomicfile.Write(filepath.Join(s.dir, counterFileName), []byte(strconv.Itoa(n)+"\n"), 0o600, false)
}

// create allocates the next free session id and stores an empty session.
func (s *store) create(cwd string) (*sessionFile, error) {
	start := s.readCounter()
	for n := start; n < start+maxIDProbes; n++ {
		id := "sess-" + strconv.Itoa(n)
		f, err := os.OpenFile(s.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sf := &sessionFile{Version: fileVersion, SessionID: id, Cwd: cwd, NextToolCall: 1, History: []json.RawMessage{}}
		b, err := json.Marshal(sf)
		if err == nil {
			_, err = f.Write(b)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(s.path(id))
			return nil, err
		}
		// The counter is only a hint: failing to update it costs probes, not correctness.
		_ = s.writeCounter(n + 1)
		return sf, nil
	}
	return nil, fmt.Errorf("no free session id after %d probes", maxIDProbes)
}

// load reads a stored session; errSessionNotFound if there is none.
func (s *store) load(id string) (*sessionFile, error) {
	if !safename.Valid(id) {
		return nil, errSessionNotFound
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errSessionNotFound
	}
	if err != nil {
		return nil, err
	}
	var sf sessionFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, fmt.Errorf("session %s: corrupt state file: %w", id, err)
	}
	if sf.SessionID != id {
		return nil, fmt.Errorf("session %s: state file names session %q", id, sf.SessionID)
	}
	if sf.NextToolCall < 1 {
		sf.NextToolCall = 1
	}
	return &sf, nil
}

// save writes the session through a temporary file and a rename, so that a
// reader (another process) never sees a half-written file.
func (s *store) save(sf *sessionFile) error {
	b, err := encodeSession(sf)
	if err != nil {
		return err
	}
	return atomicfile.Write(s.path(sf.SessionID), b, 0o600, false)
}

// encodeSession is json.Marshal(sf) without re-validating the history
// entries (they come from json.Marshal), which is much cheaper once a
// session holds large updates (/big).
func encodeSession(sf *sessionFile) ([]byte, error) {
	head := *sf
	head.History = nil
	b, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	// b ends with `"history":null}`.
	b, ok := bytes.CutSuffix(b, []byte(`null}`))
	if !ok {
		return nil, errors.New("unexpected session encoding")
	}
	size := len(b) + 3
	for _, h := range sf.History {
		size += len(h) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, b...)
	out = append(out, '[')
	for i, h := range sf.History {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, h...)
	}
	return append(out, ']', '}'), nil
}

// listEntry is what session/list reports for one stored session.
type listEntry struct {
	id  string
	cwd string
}

// list returns the stored sessions, ordered by id (sess-2 before sess-10).
func (s *store) list() ([]listEntry, error) {
	ents, err := os.ReadDir(s.sessionsDir())
	if err != nil {
		return nil, err
	}
	var out []listEntry
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		id := strings.TrimSuffix(name, ".json")
		sf, err := s.load(id)
		if err != nil {
			continue
		}
		out = append(out, listEntry{id: id, cwd: sf.Cwd})
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].id) != len(out[j].id) {
			return len(out[i].id) < len(out[j].id)
		}
		return out[i].id < out[j].id
	})
	return out, nil
}
