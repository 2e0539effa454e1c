package sqlstore

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
)

// KeyEnv is the environment variable that may hold the server's store key,
// base64: for deployments whose secrets come from the environment.
const KeyEnv = "BLAISE_STORE_KEY"

// LoadKey returns the 32-byte key of persisted plug state: from the
// environment variable env (base64) when it is set, else from the file at
// path, which is created (0600, a random key) if missing and refused if
// others may read or write it.
func LoadKey(path, env string) ([]byte, error) {
	if v := os.Getenv(env); env != "" && v != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("store key in $%s: want %d bytes in base64: %v", env, sealed.KeySize, err)
		}
		if len(key) != sealed.KeySize {
			return nil, fmt.Errorf("store key in $%s holds %d bytes, want %d (e.g. `head -c %d /dev/urandom | base64`)", env, len(key), sealed.KeySize, sealed.KeySize)
		}
		return key, nil
	}
	if path == "" {
		return nil, fmt.Errorf("no store key: set $%s or name a key file", env)
	}
	return sealed.LoadKeyFile(path)
}
