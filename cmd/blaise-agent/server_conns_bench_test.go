package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// BenchmarkServerIdleConns: an attacker holds idle connections to a real
// server from many loopback addresses (200 each, under the per-address
// cap), $BLAISE_HELD_CONNS of them, by default 20,000 or as many as the
// benchmark's descriptor limit leaves room for (its soft limit raised to
// the hard one, reported as fd-limit). The server closes what is over its
// caps and what sends no header within 10 s, and the attacker dials each
// again a second after it was closed, so that it holds as many as the
// server lets it. Each iteration is a health check (GET /healthz on a
// connection of its own, as a monitor makes it), 100 ms apart; it reports
// their p50, p95 and max, and how many failed; then a runner's connection
// through a proxy is cut, and it reports the time until the runner is
// connected again (its first retry waits 250 ms); and, taken before each
// health check, the server's open descriptors at most and the attacker's
// connections open on average.
func BenchmarkServerIdleConns(b *testing.B) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Skip("no descriptor limit: ", err)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	conns := min(20_000, int(rl.Cur)-1000)
	if v := os.Getenv("BLAISE_HELD_CONNS"); v != "" {
		var err error
		if conns, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BLAISE_HELD_CONNS=%q: want a number", v)
		}
	}
	l := newServerLab(b, "", time.Minute)
	addr := strings.TrimPrefix(l.url, "http://")
	proxy := newCutter(b, addr)
	r := l.startRunnerVia("r1", "blaise.star", proxy.url())
	testsupport.Eventually(b, "the runner connects", func() bool { return strings.Count(r.logs.String(), "listen: connected") == 1 })

	a := &attacker{addr: addr, stop: make(chan struct{})}
	a.hold(conns)
	defer a.end()

	health := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var took []time.Duration
	failed, held, fds := 0, 0.0, 0
	for b.Loop() {
		held += float64(a.open.Load())
		fds = max(fds, fdsOf(b, l.serve.Process.Pid))
		t0 := time.Now()
		resp, err := health.Get(l.url + "/healthz")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("health check: %s", resp.Status)
			}
		}
		if err != nil {
			failed++
		} else {
			took = append(took, time.Since(t0))
		}
		// Spread over more than the header timeout: the attacker's
		// connections are closed and dialed again meanwhile.
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(float64(rl.Cur), "fd-limit")
	b.ReportMetric(held/float64(b.N), "held-conns-mean")
	b.ReportMetric(float64(fds), "server-fds-max")
	b.ReportMetric(float64(failed), "healthz-failed")
	if len(took) > 0 {
		slices.Sort(took)
		for _, q := range []struct {
			unit string
			at   float64
		}{{"healthz-p50-ms", 0.5}, {"healthz-p95-ms", 0.95}, {"healthz-max-ms", 1}} {
			b.ReportMetric(float64(took[int(q.at*float64(len(took)-1))].Microseconds())/1000, q.unit)
		}
	}
	t0 := time.Now()
	proxy.cut()
	testsupport.Eventually(b, "the runner connects again", func() bool { return strings.Count(r.logs.String(), "listen: connected") == 2 })
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "runner-reconnect-ms")
}

// attacker holds idle connections to addr, each dialed again a second
// after the server closed it.
type attacker struct {
	addr string
	open atomic.Int64 // connections held now
	stop chan struct{}
	wg   sync.WaitGroup
}

// hold dials n connections, 200 from each of 127.0.1.1 on, and returns
// once each was dialed once.
func (a *attacker) hold(n int) {
	var first sync.WaitGroup
	first.Add(n)
	for i := range n {
		from := &net.TCPAddr{IP: net.IPv4(127, 0, 1+byte(i/200/250), byte(1+i/200%250))}
		a.wg.Go(func() { a.keep(net.Dialer{LocalAddr: from}, first.Done) })
	}
	first.Wait()
}

// keep holds a connection until a.stop, dialing it again each time it is
// closed; dialed is called after the first dial.
func (a *attacker) keep(d net.Dialer, dialed func()) {
	for {
		c, err := d.Dial("tcp", a.addr)
		if dialed != nil {
			dialed()
			dialed = nil
		}
		if err == nil {
			a.open.Add(1)
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, c) // until the server closes it
				close(closed)
			}()
			select {
			case <-a.stop:
			case <-closed:
			}
			c.Close()
			a.open.Add(-1)
		}
		select {
		case <-a.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

func (a *attacker) end() {
	close(a.stop)
	a.wg.Wait()
}

// fdsOf is how many descriptors a process has open.
func fdsOf(b *testing.B, pid int) int {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	return len(fds)
}
