// Package sealed encrypts persisted plug state at rest (C11) with
// AES-256-GCM, bound to its session and plug id, for the file store and the
// SQL stores alike.
//
// Sealed data is
//
//	"BLPS" | version byte (1) | 12-byte nonce | ciphertext and tag
//
// with additional data "BLPS" | version | "<session>/<plugid>", so data
// copied to another session or plug does not open.
package sealed

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// Version is the format version of sealed data.
const Version = 1

var magic = []byte("BLPS")

var (
	// ErrForeign: the data is not sealed plug state at all.
	ErrForeign = errors.New("not blaise-agent persisted state")
	// ErrOpen: the data does not decrypt with this key for this session
	// and plug.
	ErrOpen = errors.New("cannot be decrypted (written with another key, or corrupt)")
)

// VersionError is the error of Open for data of another format version.
type VersionError struct{ Version byte }

func (e *VersionError) Error() string {
	return fmt.Sprintf("format version %d; this blaise-agent reads version %d", e.Version, Version)
}

// Box seals and opens with one key.
type Box struct{ aead cipher.AEAD }

// New returns a Box for a KeySize-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the key holds %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead}, nil
}

func header() []byte { return append(bytes.Clone(magic), Version) }

func additionalData(session, plugID string) []byte {
	return append(header(), session+"/"+plugID...)
}

// Seal encrypts plain, the state of plugID in session, with a fresh nonce.
func (b *Box) Seal(session, plugID string, plain []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	rand.Read(nonce)
	out := append(header(), nonce...)
	return b.aead.Seal(out, nonce, plain, additionalData(session, plugID))
}

// Open decrypts what Seal returned for the same session and plug id. Its
// error is ErrForeign, a *VersionError or ErrOpen.
func (b *Box) Open(session, plugID string, data []byte) ([]byte, error) {
	h := header()
	if len(data) < len(h) || !bytes.Equal(data[:len(magic)], magic) {
		return nil, ErrForeign
	}
	if v := data[len(magic)]; v != Version {
		return nil, &VersionError{v}
	}
	rest := data[len(h):]
	ns := b.aead.NonceSize()
	if len(rest) < ns+b.aead.Overhead() {
		return nil, ErrOpen
	}
	plain, err := b.aead.Open(nil, rest[:ns], rest[ns:], additionalData(session, plugID))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
