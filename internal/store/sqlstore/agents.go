package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Agent is a named agent of the server: the settings of its sessions (L1)
// and where its runners' configuration lives.
type Agent struct {
	Name     string             `json:"name"`
	Settings lifecycle.Settings `json:"settings"`
	// Config is a hint for people and runners: the path of the agent's
	// blaise.star in its repository.
	Config  string    `json:"config,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// normalize checks a's name and fills in and caps its settings
// (lifecycle.NormalizeSettings: SESSION_MAX_PAUSED_LIFETIME_MS).
func (a *Agent) normalize() error {
	if err := lifecycle.CheckName("agent", a.Name); err != nil {
		return err
	}
	s, err := lifecycle.NormalizeSettings(a.Settings)
	if err != nil {
		return fmt.Errorf("agent %s: settings: %w", a.Name, err)
	}
	a.Settings = s
	return nil
}

// CreateAgent stores a new agent, its settings normalized, and returns it
// as stored. It fails, wrapping ErrExists, when the name is in use.
func (s *agentStore) CreateAgent(ctx context.Context, a Agent) (*Agent, error) {
	if err := a.normalize(); err != nil {
		return nil, err
	}
	a.Created = s.now()
	a.Updated = a.Created
	settings, err := json.Marshal(a.Settings)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.Name, err)
	}
	n, err := affected(s.writer().exec(ctx,
		"INSERT INTO agents (name, config, settings, created, updated) VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
		a.Name, a.Config, string(settings), a.Created.UnixNano(), a.Updated.UnixNano()))
	if err != nil {
		return nil, fmt.Errorf("agent %s: %s: %w", a.Name, s.where, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("agent %s %w", a.Name, ErrExists)
	}
	return &a, nil
}

const agentColumns = "name, config, settings, created, updated"

func scanAgent(row interface{ Scan(...any) error }) (*Agent, error) {
	var a Agent
	var settings string
	var created, updated int64
	if err := row.Scan(&a.Name, &a.Config, &settings, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(settings), &a.Settings); err != nil {
		return nil, fmt.Errorf("agent %s: its stored settings are corrupt: %v", a.Name, err)
	}
	a.Created, a.Updated = fromNanos(created), fromNanos(updated)
	return &a, nil
}

// Agent returns an agent, or an error wrapping ErrNotFound.
func (s *agentStore) Agent(ctx context.Context, name string) (*Agent, error) {
	return s.agent(ctx, s.read, name, "")
}

func (s *agentStore) agent(ctx context.Context, c conn, name, lock string) (*Agent, error) {
	if err := lifecycle.CheckName("agent", name); err != nil {
		return nil, err
	}
	a, err := scanAgent(c.row(ctx, "SELECT "+agentColumns+" FROM agents WHERE name = ?"+lock, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: %s: %w", name, s.where, err)
	}
	return a, nil
}

// Agents returns every agent, sorted by name.
func (s *agentStore) Agents(ctx context.Context) ([]*Agent, error) {
	return list(ctx, s.handles, "agents", "SELECT "+agentColumns+" FROM agents ORDER BY name", scanAgent)
}

// UpdateAgent changes an agent atomically: f edits it, its settings are
// normalized again, and an error from either writes nothing. The name
// cannot change.
func (s *agentStore) UpdateAgent(ctx context.Context, name string, f func(*Agent) error) (*Agent, error) {
	var a *Agent
	err := s.inTx(ctx, func(c conn) error {
		var err error
		if a, err = s.agent(ctx, c, name, s.d.forUpdate); err != nil {
			return err
		}
		if err := f(a); err != nil {
			return err
		}
		if a.Name != name {
			return fmt.Errorf("agent %s: an update may not change the name (to %q)", name, a.Name)
		}
		if err := a.normalize(); err != nil {
			return err
		}
		a.Updated = s.now()
		settings, err := json.Marshal(a.Settings)
		if err != nil {
			return fmt.Errorf("agent %s: %w", name, err)
		}
		if _, err := c.exec(ctx, "UPDATE agents SET config = ?, settings = ?, updated = ? WHERE name = ?",
			a.Config, string(settings), a.Updated.UnixNano(), name); err != nil {
			return fmt.Errorf("agent %s: %s: %w", name, s.where, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// DeleteAgent removes an agent; its sessions stay. An unknown name is an
// error wrapping ErrNotFound.
func (s *agentStore) DeleteAgent(ctx context.Context, name string) error {
	if err := lifecycle.CheckName("agent", name); err != nil {
		return err
	}
	n, err := affected(s.writer().exec(ctx, "DELETE FROM agents WHERE name = ?", name))
	if err != nil {
		return fmt.Errorf("agent %s: %s: %w", name, s.where, err)
	}
	if n == 0 {
		return fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	return nil
}

// fromNanos is the UTC time of Unix nanoseconds; 0 is the zero time
// (never).
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
