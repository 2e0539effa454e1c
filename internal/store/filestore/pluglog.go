package filestore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

var _ lifecycle.PlugLogs = (*Store)(nil)

// plugLogFile is a session's plug log: its lines as JSON, one a line.
const plugLogFile = "plugs.jsonl"

// AppendPlugLog appends lines to the session's plug log (0600: as the
// transcript, it may hold what the plugs saw). A run of this machine
// sends each line once.
func (s *sessionFiles) AppendPlugLog(ctx context.Context, id string, lines []lifecycle.PlugLogLine) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSessionID(id); err != nil {
		return err
	}
	var data []byte
	for i := range lines {
		b, err := json.Marshal(&lines[i])
		if err != nil {
			return fmt.Errorf("session %s: plug log: %w", id, err)
		}
		data = append(append(data, b...), '\n')
	}
	f, err := os.OpenFile(s.path(sessionsDir, id, plugLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plug log: session %s: %w", id, lifecycle.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("session %s: plug log: %w", id, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("session %s: plug log: %w", id, err)
	}
	return nil
}

// PlugLog reads the session's plug log; a session whose plugs logged
// nothing has none. A line that is not a plug log line is an error that
// names it.
func (s *sessionFiles) PlugLog(ctx context.Context, id string) ([]lifecycle.PlugLogLine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	name := s.path(sessionsDir, id, plugLogFile)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(s.sessionDir(id)); err != nil {
			return nil, fmt.Errorf("plug log: session %s: %w", id, lifecycle.ErrNotFound)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: plug log: %w", id, err)
	}
	defer f.Close()
	var lines []lifecycle.PlugLogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, lifecycle.MaxPlugLogBytes+64<<10)
	for n := 1; sc.Scan(); n++ {
		var l lifecycle.PlugLogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return lines, fmt.Errorf("session %s: plug log %s:%d: %v", id, name, n, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return lines, fmt.Errorf("session %s: plug log %s: %w", id, name, err)
	}
	return lines, nil
}
