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
	// Server, when Store is nil, reads a server's transcript: what its
	// chunks after the chunk numbered after hold (0: from the start), and
	// the number of the last of them (-1: the server does not say).
	Server func(ctx context.Context, after int64) (io.ReadCloser, int64, error)
	// Live, with Server, says whether a run of the session is in progress.
	Live func(ctx context.Context) (bool, error)
	ID   string // the session's
	// Follow reads on while a run of the session is in progress, until it
	// ends.
	Follow bool
	// Records writes the records as stored, one JSON object a line, rather
	// than rendered as run renders a session.
	Records bool
}

// WriteLog writes a session's transcript (`blaise-agent sessions log`) as
// it reads it, a line at a time, through a buffer flushed at each poll.
func WriteLog(ctx context.Context, o LogOptions) (err error) {
	out := bufio.NewWriterSize(o.Out, 64<<10)
	defer func() {
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
	}()
	var live func() (bool, error)
	if o.Follow && o.Store != nil {
		live = func() (bool, error) {
			if err := out.Flush(); err != nil {
				return false, err
			}
			rec, err := o.Store.Session(ctx, o.ID)
			return err == nil && rec.State == lifecycle.Active, err
		}
	}
	each := func(line []byte) { out.Write(line); out.WriteByte('\n') }
	if !o.Records {
		errs := flushFirst{out, o.Err} // in order with what came before
		term := &client.Terminal{Out: out, Err: errs, Color: o.Color}
		l := &Log{Term: term, Err: errs}
		each = l.Record
		defer term.EndTurn("")
	}
	if o.Store == nil {
		return serverLog(ctx, o, out, each)
	}
	if err := Lines(ctx, o.Store.TranscriptPath(o.ID), live, each); err != nil {
		return fmt.Errorf("session %s: transcript: %w", o.ID, err)
	}
	return nil
}

// serverLog gives each line of a server's transcript to each, as it comes;
// with Follow, it then asks for what is new while a run of the session is
// in progress, and once more when it has ended.
func serverLog(ctx context.Context, o LogOptions, out *bufio.Writer, each func([]byte)) error {
	after, final := int64(0), !o.Follow
	for {
		rd, next, err := o.Server(ctx, after)
		if err != nil {
			return err
		}
		err = scanLines(rd, each)
		rd.Close()
		if err != nil {
			return fmt.Errorf("session %s: transcript: %w", o.ID, err)
		}
		if final {
			return nil
		}
		if next < 0 {
			return errors.New("the server does not say where its transcript ends: --follow needs a newer server")
		}
		after = next
		if err := out.Flush(); err != nil {
			return err
		}
		going, err := o.Live(ctx)
		if err != nil {
			return err
		}
		if !going {
			final = true // its last records were written before the run ended
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// scanLines gives each line of r to each.
func scanLines(r io.Reader, each func([]byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), acp.MaxRecordLine)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			each(line)
		}
	}
	return sc.Err()
}

// flushFirst writes to w what is buffered in out first.
type flushFirst struct {
	out *bufio.Writer
	w   io.Writer
}

func (f flushFirst) Write(p []byte) (int, error) {
	if err := f.out.Flush(); err != nil {
		return 0, err
	}
	return f.w.Write(p)
}
