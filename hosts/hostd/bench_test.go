package hostd

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/blaiseagent/blaise-agent/hosts"
	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as hostd: "hostd [--workspace DIR]".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hostd" {
		fl := flag.NewFlagSet("hostd", flag.ExitOnError)
		ws := fl.String("workspace", "", "")
		fl.Parse(os.Args[2:])
		if err := ServeStdio(context.Background(), *ws, ServeOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// benchHosts returns the local host and a hostd process reached through
// its stdio (hosts.command), both in workspace.
func benchHosts(b *testing.B) map[string]hosts.Host {
	ws := b.TempDir()
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: ws})
	remote := NewCommand(CommandOptions{Via: local, Argv: []string{os.Args[0], "hostd", "--workspace", ws}})
	b.Cleanup(func() {
		remote.Close()
		local.Close()
	})
	if _, err := remote.Info(context.Background()); err != nil { // connect before timing
		b.Fatal(err)
	}
	return map[string]hosts.Host{"local": local, "hostd": remote}
}

// forEach runs f as a sub-benchmark on the local host, then on hostd.
func forEach(b *testing.B, f func(b *testing.B, h hosts.Host)) {
	hs := benchHosts(b)
	for _, name := range []string{"local", "hostd"} {
		b.Run(name, func(b *testing.B) { f(b, hs[name]) })
	}
}

// BenchmarkExecTrue: the latency of exec(["true"]).
func BenchmarkExecTrue(b *testing.B) {
	forEach(b, func(b *testing.B, h hosts.Host) {
		ctx := context.Background()
		for b.Loop() {
			if res, err := h.Exec(ctx, []string{"true"}, hosts.ExecOptions{}); err != nil || res.Code != 0 {
				b.Fatal(res, err)
			}
		}
	})
}

// BenchmarkFile100MiB: write then read a 100 MiB file through fs.
func BenchmarkFile100MiB(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 100<<20/16)
	forEach(b, func(b *testing.B, h hosts.Host) {
		ctx := context.Background()
		b.SetBytes(2 * int64(len(data)))
		for b.Loop() {
			if err := h.FS().WriteFile(ctx, "big", data, 0); err != nil {
				b.Fatal(err)
			}
			got, err := h.FS().ReadFile(ctx, "big")
			if err != nil || len(got) != len(data) {
				b.Fatal(len(got), err)
			}
		}
	})
}

// BenchmarkSpawnEcho1KiB: ACP-sized messages through a spawned process's
// stdio: 1 KiB lines written to cat and read back, written while they are read back.
func BenchmarkSpawnEcho1KiB(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	forEach(b, func(b *testing.B, h hosts.Host) {
		p, err := h.Spawn(context.Background(), hosts.SpawnSpec{Argv: []string{"cat"}})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Kill()
		r := bufio.NewReader(p.Stdout())
		b.SetBytes(int64(len(line)))
		n := 0
		done := make(chan error, 1)
		go func() {
			for range b.N {
				if _, err := r.ReadSlice('\n'); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		b.ResetTimer()
		for range b.N {
			if _, err := p.Stdin().Write(line); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	})
}
