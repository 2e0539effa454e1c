package dashboard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// Failed sign-ins of a user, or from an address, are free up to a point,
// then wait a doubling backoff, then lock the user or address; a success
// clears them, and other users and addresses are not concerned.
func TestSignInBacksOffThenLocksPerUserAndPerAddress(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newSignInLimit()
	l.now = func() time.Time { return now }
	for i := range freeFailures {
		if why, _ := l.refused("ada", "10.0.0.1"); why != "" {
			t.Fatalf("attempt %d refused: %s", i+1, why)
		}
		l.failed("ada", "10.0.0.1")
	}
	if why, _ := l.refused("ada", "10.0.0.9"); !strings.Contains(why, "Too many failed sign-ins for this user: try again after 00:00:30 UTC") {
		t.Fatalf("after %d failures, from elsewhere: %q", freeFailures, why)
	}
	if _, wait := l.refused("ada", "10.0.0.1"); wait != firstBackoff {
		t.Fatalf("after %d failures the next attempt waits %s, want %s", freeFailures, wait, firstBackoff)
	}
	if why, _ := l.refused("bob", "10.0.0.1"); !strings.Contains(why, "for this address") {
		t.Fatalf("after %d failures, another user from the address: %q", freeFailures, why)
	}
	if why, _ := l.refused("bob", "10.0.0.9"); why != "" {
		t.Fatalf("another user from another address: %q", why)
	}
	var locked []limitKey
	for n := freeFailures; n < lockFailures; n++ {
		now = now.Add(firstBackoff << (n - freeFailures)) // the backoff, doubling
		if why, _ := l.refused("ada", "10.0.0.1"); why != "" {
			t.Fatalf("after the backoff of failure %d: %q", n, why)
		}
		locked = l.failed("ada", "10.0.0.1")
	}
	if len(locked) != 2 {
		t.Fatalf("after %d failures locked %v, want the user and the address", lockFailures, locked)
	}
	now = now.Add(lockFor - time.Second)
	if why, _ := l.refused("ada", "10.0.0.9"); !strings.Contains(why, "Sign-in is locked after too many failures for this user") {
		t.Fatalf("within the lock: %q", why)
	}
	now = now.Add(2 * time.Second)
	if why, _ := l.refused("ada", "10.0.0.1"); why != "" {
		t.Fatalf("after the lock: %q", why)
	}
	l.succeeded("ada", "10.0.0.1")
	if len(l.fails) != 0 {
		t.Fatalf("a success left failures: %v", l.fails)
	}
}

// At most maxHashes password hashes run at once, at most maxHashWaiting
// requests wait for one, and the others are refused at once.
func TestPasswordHashesAreBounded(t *testing.T) {
	l := newSignInLimit()
	release := make(chan struct{})
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range maxHashWaiting {
		wg.Go(func() {
			err := l.hash(context.Background(), func() error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	testsupport.Eventually(t, "every request waits or hashes", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.waiting == maxHashWaiting
	})
	if err := l.hash(context.Background(), func() error { return nil }); !errors.Is(err, errHashBusy) {
		t.Fatalf("one request too many: %v", err)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != maxHashes {
		t.Fatalf("%d hashes ran at once, want %d", m, maxHashes)
	}
}
