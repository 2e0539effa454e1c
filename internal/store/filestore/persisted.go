package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// Persisted is the store's persisted plug state.
func (s *persistedFiles) Persisted() lifecycle.Persisted { return persisted{s} }

type persisted struct{ s *persistedFiles }

var _ lifecycle.Persisted = persisted{}

// Get returns the value of a plug's persisted state; ok is false when there
// is none.
func (p persisted) Get(ctx context.Context, session, plugID string) ([]byte, bool, error) {
	if err := checkSessionID(session); err != nil {
		return nil, false, err
	}
	if err := checkPlugID(plugID); err != nil {
		return nil, false, err
	}
	var st *persistedState
	err := p.s.withLockContext(ctx, false, func() error {
		var err error
		st, err = p.s.readPersisted(session, plugID)
		return err
	})
	if err != nil || st == nil {
		return nil, false, err
	}
	return st.Value, true, nil
}

// Set stores a plug's persisted state, data being its JSON. It returns once
// the write is durable. The session must exist.
func (p persisted) Set(ctx context.Context, session, plugID, plugName string, data []byte) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	if err := checkPlugID(plugID); err != nil {
		return err
	}
	if !json.Valid(data) {
		return fmt.Errorf("persisted state of plug %s in session %s: the value is not JSON", plugID, session)
	}
	// Built by hand: json.Marshal would compact the value, and Get returns
	// the bytes Set was given.
	name, err := json.Marshal(plugName)
	if err != nil {
		return err
	}
	var plain bytes.Buffer
	plain.WriteString(`{"plug":`)
	plain.Write(name)
	plain.WriteString(`,"value":`)
	plain.Write(data)
	plain.WriteString("}")
	file := p.s.box.Seal(session, plugID, plain.Bytes())

	return p.s.withLockContext(ctx, true, func() error {
		if _, err := os.Stat(p.s.sessionPath(session)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("persisted state of plug %s: session %s: %w", plugID, session, lifecycle.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		dir := filepath.Join(p.s.sessionDir(session), persistedDir)
		if err := mkdirDurable(dir); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		p.s.removeTemps(dir)
		if err := atomicfile.Write(p.s.persistedPath(session, plugID), file, 0o600, true); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		return nil
	})
}

// Delete removes a plug's persisted state; there being none is no error.
func (p persisted) Delete(ctx context.Context, session, plugID string) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	if err := checkPlugID(plugID); err != nil {
		return err
	}
	return p.s.withLockContext(ctx, true, func() error {
		name := p.s.persistedPath(session, plugID)
		if err := os.Remove(name); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(name)); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		return nil
	})
}

// PersistedIDs returns the ids of the plugs with persisted state in a
// session, sorted.
func (s *persistedFiles) PersistedIDs(ctx context.Context, session string) ([]string, error) {
	if err := checkSessionID(session); err != nil {
		return nil, err
	}
	var ids []string
	err := s.withLock(ctx, false, func() error {
		dir := filepath.Join(s.sessionDir(session), persistedDir)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			id, ok := strings.CutSuffix(name, persistedExt)
			if !ok || !e.Type().IsRegular() || checkPlugID(id) != nil {
				return fmt.Errorf("persisted state of session %s: %s is not a persisted state file", session, filepath.Join(dir, name))
			}
			ids = append(ids, id)
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}

// PersistedPlug returns the name of the plug that stored a plug id's
// persisted state in a session (named in the orphaned-state report); ok is
// false when there is no such state.
func (s *persistedFiles) PersistedPlug(ctx context.Context, session, plugID string) (name string, ok bool, err error) {
	if err := checkSessionID(session); err != nil {
		return "", false, err
	}
	if err := checkPlugID(plugID); err != nil {
		return "", false, err
	}
	var st *persistedState
	err = s.withLock(ctx, false, func() error {
		var err error
		st, err = s.readPersisted(session, plugID)
		return err
	})
	if err != nil || st == nil {
		return "", false, err
	}
	return st.Plug, true, nil
}

// DeletePersisted removes all of a session's persisted state.
func (s *persistedFiles) DeletePersisted(ctx context.Context, session string) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	return s.withLock(ctx, true, func() error {
		dir := filepath.Join(s.sessionDir(session), persistedDir)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		return nil
	})
}

// persistedState is the plaintext of a persisted state file.
type persistedState struct {
	Plug  string          `json:"plug"`
	Value json.RawMessage `json:"value"`
}

// readPersisted reads and decrypts a persisted state file; it returns nil,
// nil when there is none.
func (s *persistedFiles) readPersisted(session, plugID string) (*persistedState, error) {
	name := s.persistedPath(session, plugID)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
	}
	plain, err := s.box.Open(session, plugID, data)
	var verr *sealed.VersionError
	switch {
	case errors.Is(err, sealed.ErrForeign):
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s is not a blaise-agent persisted state file", plugID, session, name)
	case errors.As(err, &verr):
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s has %v", plugID, session, name, verr)
	case err != nil:
		return nil, fmt.Errorf("persisted state of plug %s in session %s %v: %s", plugID, session, err, name)
	}
	st := new(persistedState)
	if err := json.Unmarshal(plain, st); err != nil || st.Value == nil {
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s decrypts to a malformed value", plugID, session, name)
	}
	return st, nil
}
