package lifecycle

import (
	"sync"
	"time"
)

// Clock is the control plane's time: the real one, or a fake one that
// tests move by hand.
type Clock interface {
	Now() time.Time
	// After sends the time once d has passed from now.
	After(d time.Duration) <-chan time.Time
	// At sends the time once it is t. A deadline computed from an earlier
	// reading of the clock waits for t, however far the clock moved since
	// (After(t.Sub(then)) would wait that much longer).
	At(t time.Time) <-chan time.Time
}

// RealClock is the time of the machine.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (RealClock) At(t time.Time) <-chan time.Time        { return time.After(time.Until(t)) }

// FakeClock is a clock that moves only by Advance. Its zero value is not
// usable: use NewFakeClock.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	// waiting is signalled whenever a new waiter arrives.
	waiting chan struct{}
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

// NewFakeClock returns a fake clock at now.
func NewFakeClock(now time.Time) *FakeClock {
	return &FakeClock{now: now, waiting: make(chan struct{}, 1)}
}

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at(c.now.Add(d))
}

func (c *FakeClock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at(t)
}

// at registers a waiter for t; c.mu is held.
func (c *FakeClock) at(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: t, c: ch})
	select {
	case c.waiting <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves the clock by d and fires what is due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- c.now
	}
	c.waiters = kept
}

// Waiting is signalled when someone starts waiting on the clock: a test
// advances it once the code it drives waits.
func (c *FakeClock) Waiting() <-chan struct{} { return c.waiting }
