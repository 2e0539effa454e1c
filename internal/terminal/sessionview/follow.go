package sessionview

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// followPoll is how often a followed transcript is read again: the file is
// appended to by another process, and a person reading along does not
// notice a fifth of a second.
const followPoll = 200 * time.Millisecond

// Lines calls each with every complete line of the transcript at path. With
// live, it then reads on as the file grows while live reports the session's
// run in progress, and returns once it reports none and the last lines are
// read. A transcript that does not exist yet has no lines.
func Lines(ctx context.Context, path string, live func() (bool, error), each func([]byte)) error {
	var (
		f       *os.File
		partial []byte
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	// drain reads what the file holds now; a line still being written
	// waits for its end.
	drain := func() error {
		if f == nil {
			var err error
			if f, err = os.Open(path); errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
		}
		r := bufio.NewReader(f)
		for {
			chunk, err := r.ReadBytes('\n')
			partial = append(partial, chunk...)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if line := bytes.TrimSpace(partial); len(line) > 0 {
				each(line)
			}
			partial = partial[:0]
		}
	}
	for {
		if err := drain(); err != nil || live == nil {
			return err
		}
		going, err := live()
		if err != nil {
			return err
		}
		if !going {
			// Its last records were written before the run ended.
			return drain()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// LogOptions say which transcript WriteLog writes, where and how.
type LogOptions struct {
	Out, Err io.Writer
	Color    bool // styles in Out
	Store    *filestore.Store
	// Transcript, when Store is nil, is the transcript to write (a
	// server's); Follow is not for it.
	Transcript io.Reader
	ID         string // the session's
	// Follow reads on while a run of the session is in progress, until it
	// ends.
	Follow bool
	// Records writes the records as stored, one JSON object a line, rather
	// than rendered as run renders a session.
	Records bool
}

// WriteLog writes a session's transcript (`blaise-agent sessions log`).
func WriteLog(ctx context.Context, o LogOptions) error {
	var live func() (bool, error)
	if o.Follow {
		live = func() (bool, error) {
			rec, err := o.Store.Session(ctx, o.ID)
			return err == nil && rec.State == lifecycle.Active, err
		}
	}
	each := func(line []byte) { fmt.Fprintf(o.Out, "%s\n", line) }
	if !o.Records {
		term := &client.Terminal{Out: o.Out, Err: o.Err, Color: o.Color}
		l := &Log{Term: term, Err: o.Err}
		each = l.Record
		defer term.EndTurn("")
	}
	if o.Store == nil {
		sc := bufio.NewScanner(o.Transcript)
		sc.Buffer(make([]byte, 0, 64<<10), acp.MaxRecordLine)
		for sc.Scan() {
			each(sc.Bytes())
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("session %s: transcript: %w", o.ID, err)
		}
		return nil
	}
	if err := Lines(ctx, o.Store.TranscriptPath(o.ID), live, each); err != nil {
		return fmt.Errorf("session %s: transcript: %w", o.ID, err)
	}
	return nil
}
