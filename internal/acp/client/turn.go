package client

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
)

// ErrRunEnded is Turn's error when the run ended during the turn.
var ErrRunEnded = errors.New("the session ended")

// ErrCancelled is Turn's error when the agent cancelled a turn that this
// client did not cancel: the session was stopped under it.
var ErrCancelled = errors.New("cancelled, not by this client: the session was stopped (its runner drained, say, or it was ended elsewhere)")

// RunEnded reports whether err says that the run ended on its own: the
// stream closed, or the proxy answered for an agent that had stopped.
func RunEnded(err error) bool {
	var rpc *RPCError
	return errors.Is(err, ErrClosed) || errors.As(err, &rpc) && rpc.Message == acp.AgentStoppedMessage
}

// ErrLeft is the status of a command left during a turn (Turn's left):
// the session paused or ended as usual, but a turn went unanswered, which
// a script must not take for success.
var ErrLeft = &exitcode.Error{Code: 130, Err: errors.New("left during a turn, before its answer")}

// Turn runs one prompt on conn, in session sid. The first Ctrl-C on sig
// cancels the turn; a second one, or SIGTERM, leaves (left). ended, when
// not nil, is closed when the run ends on its own: the turn ends with
// ErrRunEnded.
func (t *Terminal) Turn(conn *Conn, sid, text string, sig <-chan os.Signal, ended <-chan struct{}) (left bool, err error) {
	type result struct {
		stopReason string
		err        error
	}
	done := make(chan result, 1)
	t.Busy("waiting for the agent")
	defer t.Idle()
	// Ends with the prompt's answer, or with conn closed: the prompt's owner.
	go func() {
		stop, err := conn.Prompt(context.Background(), sid, text)
		done <- result{stop, err}
	}()
	cancelled := false
	for {
		select {
		case r := <-done:
			if r.err != nil {
				if errors.Is(r.err, ErrClosed) && ended != nil {
					<-ended
				}
				if closed(ended) {
					return false, ErrRunEnded
				}
				return false, r.err
			}
			t.EndTurn(r.stopReason)
			if r.stopReason == "cancelled" && !cancelled {
				return false, ErrCancelled
			}
			return false, nil
		case got := <-sig:
			if cancelled || got == syscall.SIGTERM {
				t.Notice("leaving")
				return true, nil
			}
			cancelled = true
			t.Notice("cancelling the turn (Ctrl-C again leaves; the session pauses)")
			_ = conn.Cancel(sid)
			t.CancelPrompts()
		case <-ended:
			return false, ErrRunEnded
		}
	}
}

func closed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
