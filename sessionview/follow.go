package sessionview

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
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
