package sealed

// The key file lives here, beside the key's use, because both stores read
// one: the file store in its state directory, a SQL store at the path it
// is given.

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// LoadKeyFile reads the 32-byte AES-256 key file name (0600), creating it
// with a random key if there is none. The key is published with a hard
// link, which like O_EXCL fails when the file exists, so two creators agree
// on one key even without a lock, and a crash never leaves a short key file.
func LoadKeyFile(name string) ([]byte, error) {
	key, err := readKey(name)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(name)
	key = make([]byte, KeySize)
	rand.Read(key)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*") // O_EXCL, 0600
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	err = os.Link(tmp.Name(), name)
	if errors.Is(err, fs.ErrExist) {
		return readKey(name)
	}
	if err != nil {
		// A file system without hard links: create it with O_EXCL.
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return readKey(name)
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", name, err)
		}
		_, err = f.Write(key)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", name, err)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	return key, nil
}

// readKey reads a key file, refusing one of the wrong size or readable or
// writable by others than its owner.
func readKey(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", name)
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		return nil, fmt.Errorf("key file %s has permissions %04o, broader than 0600: others may have read it; if not, chmod 600 it", name, perm)
	}
	if fi.Size() != KeySize {
		return nil, fmt.Errorf("key file %s holds %d bytes, want %d: it is not a blaise-agent key, or it is damaged", name, fi.Size(), KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	return key, nil
}
