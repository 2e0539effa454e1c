package engine_test

// The lifecycle rules (L1–L9) on the engine of a front end on one machine:
// the file store, its flocks and session processes of this machine
// (enginetest; the server runs the same suite on its stores).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine/enginetest"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if code, ok := enginetest.ServeRole(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func TestLifecycleOnTheFileStore(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, s enginetest.Setup) (*engine.Engine, string) {
		store, err := filestore.OpenStore(filepath.Join(s.Dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		store.Clock = s.Clock
		return &engine.Engine{Store: store, Command: s.Command, Env: s.Env, Stderr: s.Stderr}, ""
	})
}
