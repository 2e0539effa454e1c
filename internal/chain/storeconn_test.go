package chain

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
)

// TestADirectStoreEndsWithItsRunnersPipe: the store of a runner's run on
// connections of its own (runner protocol 7) ends when the runner's end
// of the pipe its ticket came on closes (the runner gone, or the run given
// up), whatever the run is doing: as the runner's store stream ended with
// it, a run without its runner writes nothing, and its calls fail instead
// of waiting for ever.
func TestADirectStoreEndsWithItsRunnersPipe(t *testing.T) {
	store, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.Create(t, store, store.NewSessionID()).ID
	srv := &runstore.Server{Store: store, Session: id, Run: 1}
	served := make(chan error, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t1" {
			runstore.RefuseStore(w, http.StatusForbidden, "not the ticket")
			return
		}
		conn, err := runstore.AcceptStore(w, r)
		if err != nil {
			return
		}
		served <- srv.Serve(context.Background(), conn)
		conn.Close()
	}))
	defer ts.Close()
	// Raw descriptors: storeConn owns the read end, as the session
	// process owns its file descriptor 4.
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(fds[1], []byte("t1\n")); err != nil {
		t.Fatal(err)
	}
	conn, err := storeConn(&SessionProcess{SessionID: id, Run: 1}, fds[0], ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := runstore.NewClient(conn)
	if rec, err := c.Session(t.Context(), id); err != nil || rec.ID != id {
		t.Fatalf("the run's record: %+v %v", rec, err)
	}
	syscall.Close(fds[1])
	select {
	case <-served: // the server saw the connection end
	case <-time.After(10 * time.Second):
		t.Fatal("the store connection outlived the runner's pipe")
	}
	if _, err := c.Session(t.Context(), id); err == nil {
		t.Fatal("a call answered after the runner's pipe closed")
	}
}
