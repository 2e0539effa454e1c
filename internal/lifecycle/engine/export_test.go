package engine

import (
	"testing"
	"time"
)

// SetSpareLife sets how long a spare waits for a run, for the test.
func SetSpareLife(t *testing.T, d time.Duration) {
	old := spareLife
	spareLife = d
	t.Cleanup(func() { spareLife = old })
}
