package gitcache

import (
	"bufio"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// objects reads objects of a bare repository through one
// `git cat-file --batch`, checking that each hashes to its id.
type objects struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// errTooLarge is the error of a read of an object above its limit.
var errTooLarge = errors.New("too large")

func openObjects(dir string) (*objects, error) {
	cmd := exec.Command("git", "--git-dir", dir, "cat-file", "--batch")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return &objects{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// close ends git, which may be in the middle of an object left unread.
func (o *objects) close() {
	o.in.Close()
	o.cmd.Process.Kill()
	o.cmd.Wait()
}

// read returns the content of object id, which must be of type typ and at
// most limit bytes (no limit when negative); damaged makes the error of
// an object that does not hash to its id or is not what its parent says.
func (o *objects) read(id, typ string, limit int64, damaged func(string) error) ([]byte, error) {
	if _, err := fmt.Fprintln(o.in, id); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	header, err := o.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	fields := strings.Fields(header)
	if len(fields) == 2 && fields[1] == "missing" {
		return nil, fmt.Errorf("object %s is missing", id)
	}
	// A commit may be named by a prefix (in a lock written by hand): its
	// content is checked against the full id git found for it.
	if len(fields) != 3 || !strings.HasPrefix(fields[0], id) {
		return nil, damaged(id)
	}
	id = fields[0]
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || fields[1] != typ {
		return nil, damaged(id)
	}
	if limit >= 0 && size > limit {
		return nil, errTooLarge
	}
	data := make([]byte, size+1) // and the newline after it
	if _, err := io.ReadFull(o.out, data); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	data = data[:size]
	var h hash.Hash
	switch len(id) {
	case 2 * sha1.Size:
		h = sha1.New()
	case 2 * sha256.Size:
		h = sha256.New()
	default:
		return nil, damaged(id)
	}
	fmt.Fprintf(h, "%s %d\x00", typ, size)
	h.Write(data)
	if hex.EncodeToString(h.Sum(nil)) != id {
		return nil, damaged(id)
	}
	return data, nil
}
