package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrNotFound is wrapped, with the session id, in the error of every store
// for a session it does not hold, so that callers test it with errors.Is
// whichever store they have.
var ErrNotFound = errors.New("no such session")

// BrokenRecord is a stored session record that cannot be read: in the file
// store a session.json that is corrupt, unreadable or not a file, or an
// entry of the sessions directory that is no session directory; in a SQL
// store a row that does not decode.
type BrokenRecord struct {
	ID   string // the session id, "" when the entry is no session directory
	Path string // the file store's file, "" in a SQL store
	Err  error  // names the record and what is wrong with it
}

// BrokenError is the error of a store's Sessions (and DueSessions) when
// some records cannot be read: the others are returned with it.
type BrokenError struct{ Records []BrokenRecord }

func (e *BrokenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d session record(s) cannot be read (repair or move away each one):", len(e.Records))
	for _, r := range e.Records {
		b.WriteString("\n  ")
		b.WriteString(r.Err.Error())
	}
	return b.String()
}

// Sessions keeps session records. Every call of a store takes the
// caller's ctx to the database (or the state directory's lock).
type Sessions interface {
	// CreateSession stores a new session; it fails when the id is in use.
	CreateSession(ctx context.Context, rec *Record) error
	// Session returns a session's record.
	Session(ctx context.Context, id string) (*Record, error)
	// UpdateSession changes a record atomically: an error from f writes
	// nothing.
	UpdateSession(ctx context.Context, id string, f func(*Record) error) (*Record, error)
	// Sessions returns every record.
	Sessions(ctx context.Context) ([]*Record, error)
	// DueSessions is what a sweep at now looks at, found through an index
	// rather than by reading every record: the ids of the active sessions
	// (whose run may have died) and of the sessions at rest due at or
	// before now (DueAt); next is the earliest due time after now of the
	// others, zero when none is ever due.
	DueSessions(ctx context.Context, now time.Time) (ids []string, next time.Time, err error)
}

// Persisted keeps persisted plug state per (session, plug id) (C11). Set
// returns once the write is durable.
type Persisted interface {
	Get(ctx context.Context, session, plugID string) (data []byte, ok bool, err error)
	Set(ctx context.Context, session, plugID, plugName string, data []byte) error
	Delete(ctx context.Context, session, plugID string) error
}

// Transcripts keeps the sessions' transcripts (M5).
type Transcripts interface {
	// Transcript opens a session's transcript for appending.
	Transcript(ctx context.Context, session string) (io.WriteCloser, error)
	// ReadTranscript opens a session's transcript for reading.
	ReadTranscript(ctx context.Context, session string) (io.ReadCloser, error)
}

// CallTranscripts is a store whose transcripts keep, with the lines of a
// run's append, the number of its call (runstore): a server that
// restarted does not know which calls of a run adopted the server
// before it applied, and an append sent again must not be committed twice.
type CallTranscripts interface {
	// TranscriptCall is the number of the last call of run whose lines
	// session's transcript holds; 0 if it holds none.
	TranscriptCall(ctx context.Context, session string, run int) (uint64, error)
}

// CallTranscript is a transcript of a CallTranscripts store open for
// appending.
type CallTranscript interface {
	io.WriteCloser
	// Call says that the lines written next are those of call of run,
	// up to the next Call.
	Call(run int, call uint64)
}

// Reports records what runs report (L7), so that a front end that dies
// loses nothing.
type Reports interface {
	Loaded(ctx context.Context, session string, l Loaded) error
	Paused(ctx context.Context, session string, p PauseRecord) (*Record, error)
	// TornDown records a teardown that failed with failure, or, nil,
	// succeeded.
	TornDown(ctx context.Context, session string, failure error, at time.Time) (*Record, error)
	// Titled records the session's title (Record.Title), redacted by the
	// run that took it.
	Titled(ctx context.Context, session, title string) error
}

// Store is everything the control plane keeps. The file store of one
// machine (filestore) and the server's SQL stores implement it, and the
// lifecycle engine and the runs need nothing else.
type Store interface {
	RunStore
	Sessions
	Transcripts
	// NewSessionID returns an id that no session has.
	NewSessionID() string
	// Discard removes a session whose first run never loaded its
	// configuration, with all it stored.
	Discard(ctx context.Context, id string) error
	// DeletePersisted deletes a session's persisted state (once it ends).
	DeletePersisted(ctx context.Context, session string) error
}

// RunStore is what a run reads and records: its session, its reports, its
// transcript and its plugs' persisted state. A run of this machine has the
// file store; a run on a server's runner has it over its connection.
type RunStore interface {
	Session(ctx context.Context, id string) (*Record, error)
	Reports
	// Transcript opens a session's transcript for appending.
	Transcript(ctx context.Context, session string) (io.WriteCloser, error)
	// Persisted is the sessions' persisted plug state.
	Persisted() Persisted
	// PersistedIDs lists the plug ids a session has state of.
	PersistedIDs(ctx context.Context, session string) ([]string, error)
	// PersistedPlug names the plug that stored a plug id's state.
	PersistedPlug(ctx context.Context, session, plugID string) (name string, ok bool, err error)
}
