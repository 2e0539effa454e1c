package client

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// ErrRunEnded is Turn's error when the run ended during the turn.
var ErrRunEnded = errors.New("the session ended")

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
