package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in guessing is limited per user name and per address: after
// freeFailures failures in a row, the next attempt waits firstBackoff,
// doubling with each failure; after lockFailures, the user or address is
// locked for lockFor. Failures older than lockFor are forgotten. A success clears both. Password hashes (argon2id, 19 MiB
// each) run at most maxHashes at a time, and at most maxHashWaiting
// requests wait for one: guesses cannot exhaust the server's memory.
const (
	freeFailures   = 5
	lockFailures   = 10
	firstBackoff   = 30 * time.Second
	lockFor        = 15 * time.Minute
	maxHashes      = 2
	maxHashWaiting = 16
	// maxTracked bounds the failures remembered; the oldest quiet ones go
	// first.
	maxTracked = 10000
)

// failures counts the failed sign-ins of a user name or an address.
type failures struct {
	n     int
	last  time.Time
	until time.Time // no attempt before
}

// signInLimit is the dashboard's guard on sign-in and password hashes.
type signInLimit struct {
	mu      sync.Mutex
	fails   map[limitKey]*failures
	hashes  chan struct{}
	waiting int
	now     func() time.Time
}

func newSignInLimit() *signInLimit {
	return &signInLimit{fails: map[limitKey]*failures{}, hashes: make(chan struct{}, maxHashes), now: time.Now}
}

// address is the client's IP address.
func address(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limitKey is what failures are counted for: a user name or an address.
type limitKey struct{ kind, value string }

func keys(name, addr string) []limitKey {
	return []limitKey{{"user", name}, {"address", addr}}
}

// refused says why an attempt of name from addr may not be made now, and
// how long it waits; "" when it may.
func (l *signInLimit) refused(name, addr string) (string, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, k := range keys(name, addr) {
		if f := l.fails[k]; f != nil && now.Before(f.until) {
			what := "Too many failed sign-ins"
			if f.n >= lockFailures {
				what = "Sign-in is locked after too many failures"
			}
			return fmt.Sprintf("%s for this %s: try again after %s. Nothing was checked.", what, k.kind, f.until.UTC().Format("15:04:05 UTC")), f.until.Sub(now)
		}
	}
	return "", 0
}

// failed counts a failed attempt; it returns the keys it locked now.
func (l *signInLimit) failed(name, addr string) (locked []limitKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.fails) >= maxTracked {
		l.prune(now)
	}
	for _, k := range keys(name, addr) {
		f := l.fails[k]
		if f == nil || now.Sub(f.last) > lockFor {
			f = &failures{}
			l.fails[k] = f
		}
		f.n++
		f.last = now
		switch {
		case f.n >= lockFailures:
			f.until = now.Add(lockFor)
			if f.n == lockFailures {
				locked = append(locked, k)
			}
		case f.n >= freeFailures:
			f.until = now.Add(firstBackoff << (f.n - freeFailures))
		}
	}
	return locked
}

// prune forgets quiet failures, then the oldest ones. l.mu is held.
func (l *signInLimit) prune(now time.Time) {
	var oldest *limitKey
	for k, f := range l.fails {
		if now.Sub(f.last) > lockFor && now.After(f.until) {
			delete(l.fails, k)
		} else if oldest == nil || f.last.Before(l.fails[*oldest].last) {
			oldest = &k
		}
	}
	if len(l.fails) >= maxTracked && oldest != nil {
		delete(l.fails, *oldest)
	}
}

// succeeded clears the failures of name and addr.
func (l *signInLimit) succeeded(name, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys(name, addr) {
		delete(l.fails, k)
	}
}

// errHashBusy refuses a request when too many wait for a password hash.
var errHashBusy = errors.New("the server is busy checking other passwords: try again in a moment")

// hash runs f, which hashes a password, when one of the maxHashes slots
// is free, or fails when too many requests wait or ctx ends.
func (l *signInLimit) hash(ctx context.Context, f func() error) error {
	l.mu.Lock()
	if l.waiting >= maxHashWaiting {
		l.mu.Unlock()
		return errHashBusy
	}
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
	select {
	case l.hashes <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.hashes }()
	return f()
}
