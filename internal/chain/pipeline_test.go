package chain

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestPipelineStepsCostNoAllocation checks that a plug's step of a
// message allocates nothing beyond the Starlark call of its handler: the
// steps of a message are allocated together (throughput with
// plugs).
func TestPipelineStepsCostNoAllocation(t *testing.T) {
	perMessage := func(plugs int) float64 {
		pl := loadedPipeline(t, plugs)
		m, err := acp.Parse([]byte(acptest.Update1KiB()))
		if err != nil {
			t.Fatal(err)
		}
		forward := func(*acp.Message) *acp.Message { return nil }
		return testing.AllocsPerRun(200, func() {
			if _, _, _, err := pl.Handle(acp.ToClient, m, forward); err != nil {
				t.Fatal(err)
			}
		})
	}
	// What Starlark allocates for a call of a handler like the plugs':
	// its frame, and the arguments it passes to next (a builtin).
	thread := new(starlark.Thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "h.star", "def h(ctx, message, next):\n    return next(message)\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	next := starlark.NewBuiltin("next", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	})
	args := starlark.Tuple{starlark.None, starlark.None, next}
	call := testing.AllocsPerRun(200, func() {
		if _, err := starlark.Call(thread, globals["h"], args, nil); err != nil {
			t.Fatal(err)
		}
	})
	one, five := perMessage(1), perMessage(5)
	if extra := five - one; extra > 4*call {
		t.Errorf("a message allocates %v times through 5 plugs and %v through 1: %v per plug more, of which Starlark's call is %v", five, one, extra/4, call)
	}
	// A notification no handler kept anything of leaves its traversal (and
	// the message value the first plug sees) to the next one.
	if five > 5*call {
		t.Errorf("a message allocates %v times through 5 plugs, more than the %v of Starlark's calls: its traversal is not reused", five, 5*call)
	}
}

// TestM6_APassageWhoseHandlerReachedCtxIsNotReused: a ctx that a handler
// kept (in ctx.state) stays the one of its call, closed once it returned,
// however many messages come after: the traversal it belongs to never
// serves again.
func TestM6_APassageWhoseHandlerReachedCtxIsNotReused(t *testing.T) {
	dir := t.TempDir()
	plug := `plug(name = "ctxkeeper")
def on_load(ctx):
    return {"first": None}
def on_message(ctx, message, next):
    first = ctx.state["first"]
    if first == None:
        ctx.state["first"] = ctx
    else:
        first.plug
    return next(message)
`
	if err := os.WriteFile(filepath.Join(dir, "ctxkeeper.star"), []byte(plug), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := pipelineOf(t, dir, append(acptest.NoopPlugs(t, dir, 1), `use("./ctxkeeper.star")`))
	forward := func(*acp.Message) *acp.Message { return nil }
	for i := range 3 {
		m, err := acp.Parse([]byte(acptest.Update1KiB()))
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = pl.Handle(acp.ToClient, m, forward)
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if i > 0 && (err == nil || !strings.Contains(err.Error(), "used after its handler returned")) {
			t.Fatalf("message %d: the ctx kept from the first call was used without the error of a closed ctx: %v", i, err)
		}
	}
}

// BenchmarkPipeline measures what the plugs cost a message, in the
// process and without pipes: a 1 KiB session/update through 1 and 5 no-op
// on_message plugs to a forward that takes it.
func BenchmarkPipeline(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("plugs-%d", n), func(b *testing.B) {
			pl := loadedPipeline(b, n)
			m, err := acp.Parse([]byte(acptest.Update1KiB()))
			if err != nil {
				b.Fatal(err)
			}
			forwarded := 0
			forward := func(*acp.Message) *acp.Message { forwarded++; return nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := pl.Handle(acp.ToClient, m, forward); err != nil {
					b.Fatal(err)
				}
			}
			if forwarded != b.N {
				b.Fatalf("forwarded %d messages of %d", forwarded, b.N)
			}
		})
	}
}

// loadedPipeline returns the pipeline of a run of n no-op plugs, loaded as
// a run loads them before its agent starts.
func loadedPipeline(b testing.TB, n int) *pipeline {
	dir := b.TempDir()
	return pipelineOf(b, dir, acptest.NoopPlugs(b, dir, n))
}

// pipelineOf returns the pipeline of a run of the plugs that uses (the
// use(...) of setup) name, in dir, loaded as a run loads them.
func pipelineOf(b testing.TB, dir string, uses []string) *pipeline {
	cfgPath := filepath.Join(dir, "blaise.star")
	src := fmt.Sprintf("agent(command = \"true\")\nsetup(%s)\n", strings.Join(uses, ", "))
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	logger := log.New(io.Discard)
	cfg, err := LoadConfig(cfgPath, logger)
	if err != nil {
		b.Fatal(err)
	}
	r := New(Options{Config: cfg, SessionID: "bench", Kind: lifecycle.StartRun, Logger: logger})
	r.shutdown, r.ctx = context.Background(), context.Background()
	host := hosts.NewLocal(hosts.LocalOptions{})
	b.Cleanup(func() { _ = host.Close() })
	r.runnerHost = host
	r.hostValues[host] = builtins.NewHost(host, "runner")
	for _, p := range r.plugs {
		if err := r.load(p, host); err != nil {
			b.Fatal(err)
		}
	}
	return r.pipeline(host)
}

// TestM6_ANotificationNoHandlerCouldKeepHasItsBlockReadIntoAgain: a
// notification whose handlers took nothing from ctx but ctx.log is
// released once through the plugs, so its Reader reads into its block
// again; one that a plug kept (in ctx.state) keeps its bytes, however many
// messages come after it.
func TestM6_ANotificationNoHandlerCouldKeepHasItsBlockReadIntoAgain(t *testing.T) {
	const n = 3000
	var stream strings.Builder
	for i := range n {
		fmt.Fprintf(&stream, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"i":%d,"text":%q}}}`+"\n", i, strings.Repeat("x", 1000))
	}
	// pass hands each message to the pipeline, and releases those it
	// tells free, as the proxy does.
	pass := func(t *testing.T, pl *pipeline, each func(i int, m *acp.Message, free bool)) {
		rd := acp.NewReader(strings.NewReader(stream.String()), 0)
		for i := range n {
			m, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			_, _, free, err := pl.Handle(acp.ToClient, m, func(*acp.Message) *acp.Message { return nil })
			if err != nil {
				t.Fatal(err)
			}
			each(i, m, free)
			if free {
				m.Release()
			}
		}
	}
	t.Run("passed", func(t *testing.T) {
		dir := t.TempDir()
		plug := `plug(name = "logger")
def on_message(ctx, message, next):
    ctx.log.debug("seen", method = message.method, plug = ctx.plug.name)
    return next(message)
`
		if err := os.WriteFile(filepath.Join(dir, "logger.star"), []byte(plug), 0o644); err != nil {
			t.Fatal(err)
		}
		pl := pipelineOf(t, dir, append(acptest.NoopPlugs(t, dir, 2), `use("./logger.star")`))
		// Every message is kept from the collector, so that a line read
		// where an earlier one was is a block read into again.
		var kept []*acp.Message
		at := map[*byte]bool{}
		again := 0
		pass(t, pl, func(i int, m *acp.Message, free bool) {
			if !free {
				t.Fatalf("notification %d, which no plug could keep, is not told free", i)
			}
			kept = append(kept, m)
			if at[&m.Raw[0]] {
				again++
			}
			at[&m.Raw[0]] = true
		})
		if again == 0 {
			t.Fatalf("none of %d notifications no plug could keep was read where an earlier one was", len(kept))
		}
	})
	t.Run("kept", func(t *testing.T) {
		dir := t.TempDir()
		plug := `plug(name = "keeper")
def on_load(ctx):
    return {"kept": []}
def on_message(ctx, message, next):
    if message.params["update"]["i"] % 100 == 0:
        ctx.state["kept"].append(message)
    return next(message)
`
		if err := os.WriteFile(filepath.Join(dir, "keeper.star"), []byte(plug), 0o644); err != nil {
			t.Fatal(err)
		}
		pl := pipelineOf(t, dir, []string{`use("./keeper.star")`})
		var keptRaw []string
		var keptMsgs []*acp.Message
		pass(t, pl, func(i int, m *acp.Message, free bool) {
			if free != (i%100 != 0) {
				t.Fatalf("notification %d is told free: %v, though its handler reached ctx.state: %v", i, free, i%100 == 0)
			}
			if i%100 == 0 {
				keptRaw = append(keptRaw, string(m.Raw))
				keptMsgs = append(keptMsgs, m)
			}
		})
		for i, m := range keptMsgs {
			if string(m.Raw) != keptRaw[i] {
				t.Fatalf("kept notification %d changed after %d more messages: %.80s", i*100, n-i*100, m.Raw)
			}
		}
	})
}

// TestM6_APassageServesAgainOnlyOnceItsMessageIsThrough: while requests
// wait for their answers (the session lock released), notifications go
// through the same plugs and their traversals serve again; no request's
// message, ctx or next changes under its handler meanwhile.
func TestM6_APassageServesAgainOnlyOnceItsMessageIsThrough(t *testing.T) {
	dir := t.TempDir()
	plug := `plug(name = "steady")
def on_message(ctx, message, next):
    before = (message.method, message.id, ctx.plug.name)
    answer = next(message)
    if (message.method, message.id, ctx.plug.name) != before:
        fail("changed under the handler: %s, was %s" % ((message.method, message.id, ctx.plug.name), before))
    return answer
`
	if err := os.WriteFile(filepath.Join(dir, "steady.star"), []byte(plug), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := pipelineOf(t, dir, append(acptest.NoopPlugs(t, dir, 1), `use("./steady.star")`, `use("./steady.star")`))
	const requests = 4
	answer := make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(requests)
	errs := make(chan error, requests)
	for i := range requests {
		go func() {
			id := fmt.Sprint(100 + i)
			req, err := acp.Parse(acp.NewRequest([]byte(id), "session/prompt", []byte(`{"sessionId":"s","prompt":[]}`)))
			if err != nil {
				errs <- err
				return
			}
			resp, _, _, err := pl.Handle(acp.ToAgent, req, func(m *acp.Message) *acp.Message {
				waiting.Done()
				<-answer
				r, _ := acp.Parse(acp.NewResponse(m.ID, []byte(`{"stopReason":"end_turn"}`)))
				return r
			})
			if err == nil && (resp == nil || string(resp.ID) != id) {
				err = fmt.Errorf("request %s got %v", id, resp)
			}
			errs <- err
		}()
	}
	waiting.Wait()
	forward := func(*acp.Message) *acp.Message { return nil }
	for range 200 {
		m, err := acp.Parse([]byte(acptest.Update1KiB()))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := pl.Handle(acp.ToClient, m, forward); err != nil {
			t.Fatal(err)
		}
	}
	if len(pl.spare) == 0 {
		t.Fatal("no traversal served again: the test shows nothing")
	}
	close(answer)
	for range requests {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
