package hostd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Shipping. The command runs sh on the far side, which reads one line of
// script from stdin. The script prints "blaise-ship have" when the cache
// (~/.cache/blaise-agent/<hash of the executable>/blaise-agent) holds this
// executable, else "blaise-ship need <uname -sm>" and reads an answer:
// "send <size>" followed by the executable's bytes, or "stop". Then it
// execs the cached executable as hostd, which starts the handshake. The
// script is one line because sh may read ahead within a line but not
// past it, and nothing follows the executable before hostd speaks.

// shipScript is the script; its verbs are the hash and hostd's arguments.
const shipScript = `b="${XDG_CACHE_HOME:-$HOME/.cache}/blaise-agent/%s/blaise-agent"; ` +
	`if [ -x "$b" ]; then echo "blaise-ship have"; else echo "blaise-ship need $(uname -sm)"; ` +
	`read -r w n || exit 3; [ "$w" = send ] || exit 3; ` +
	`mkdir -p "${b%%/*}" && head -c "$n" >"$b.$$" && chmod 755 "$b.$$" && mv -f "$b.$$" "$b" || exit 3; fi; ` +
	`exec "$b" %s` + "\n"

// unames maps `uname -sm` to GOOS/GOARCH.
var unames = map[string]string{
	"Linux x86_64":   "linux/amd64",
	"Linux aarch64":  "linux/arm64",
	"Linux arm64":    "linux/arm64",
	"Linux armv7l":   "linux/arm",
	"Linux i686":     "linux/386",
	"Darwin x86_64":  "darwin/amd64",
	"Darwin arm64":   "darwin/arm64",
	"FreeBSD amd64":  "freebsd/amd64",
	"FreeBSD arm64":  "freebsd/arm64",
	"Linux riscv64":  "linux/riscv64",
	"Linux ppc64le":  "linux/ppc64le",
	"Linux s390x":    "linux/s390x",
	"OpenBSD amd64":  "openbsd/amd64",
	"NetBSD amd64":   "netbsd/amd64",
	"Darwin aarch64": "darwin/arm64",
}

// ship runs the shipping exchange on t, leaving the far side running hostd
// in workspace ("": the shell's working directory).
func ship(ctx context.Context, t *commandTransport, exe, workspace string) error {
	hash, err := exeHash(exe)
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { t.Close() })
	defer stop()
	args := []string{"hostd"}
	if workspace != "" {
		args = append(args, "--workspace", workspace)
	}
	if _, err := fmt.Fprintf(t, shipScript, hash, ShellJoin(args)); err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	// One byte at a time: what follows the line is hostd's handshake.
	line, err := readByteLine(t)
	if err != nil {
		return fmt.Errorf("ship: the far shell did not answer: %w", err)
	}
	rest, ok := strings.CutPrefix(line, "blaise-ship ")
	switch {
	case !ok:
		return fmt.Errorf("ship: the far side did not run the shipping script: it said %q", clip(line))
	case rest == "have":
		return nil
	}
	uname, _ := strings.CutPrefix(rest, "need ")
	mine := runtime.GOOS + "/" + runtime.GOARCH
	if unames[uname] != mine {
		fmt.Fprintln(t, "stop")
		return fmt.Errorf("ship: the far side is %q, this executable is for %s", uname, mine)
	}
	f, err := os.Open(exe)
	if err != nil {
		fmt.Fprintln(t, "stop")
		return fmt.Errorf("ship: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		fmt.Fprintln(t, "stop")
		return fmt.Errorf("ship: %w", err)
	}
	if _, err := fmt.Fprintf(t, "send %d\n", fi.Size()); err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	if _, err := io.Copy(t, f); err != nil {
		return fmt.Errorf("ship: sending %s: %w", exe, err)
	}
	return nil
}

// readByteLine reads a line without reading past it.
func readByteLine(r io.Reader) (string, error) {
	var b []byte
	var c [1]byte
	for len(b) < 4096 {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return string(b), err
		}
		if c[0] == '\n' {
			return string(b), nil
		}
		b = append(b, c[0])
	}
	return string(b), fmt.Errorf("line longer than 4096 bytes")
}

var hashes sync.Map // path, size and mtime → hex

// exeHash names a version of the executable: the start of its SHA-256.
func exeHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	key := fmt.Sprint(path, fi.Size(), fi.ModTime().UnixNano())
	if h, ok := hashes.Load(key); ok {
		return h.(string), nil
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	h := hex.EncodeToString(sum.Sum(nil))[:16]
	hashes.Store(key, h)
	return h, nil
}
