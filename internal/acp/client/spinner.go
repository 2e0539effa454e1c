package client

import (
	"io"
	"time"
)

// spinnerFrames are drawn one after the other, every spinnerTick.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const spinnerTick = 100 * time.Millisecond

// eraseLine returns the cursor to the start of the line and erases it.
const eraseLine = "\r\x1b[K"

// spinner is the state of a screen's spinner; the Terminal's lock guards
// it.
type spinner struct {
	label   string        // "" when off
	frame   int           // the next frame
	shown   bool          // a frame is on the screen
	ticking chan struct{} // closed to stop the ticker; nil when none runs
}

// Busy shows a spinner with label on Status until the next line of the
// session is written, or Idle; a new label replaces the one showing.
// Without Status it does nothing.
func (t *Terminal) Busy(label string) {
	s := t.lock()
	defer t.mu.Unlock()
	if s.status == nil {
		return
	}
	s.endLine()
	s.spin.erase(s.status)
	s.spin.label = label
	s.spin.draw(s.status, s.paint)
	if s.spin.ticking == nil {
		done := make(chan struct{})
		s.spin.ticking = done
		// Ends when done closes (Idle); a Terminal's spinner.
		go t.tick(done)
	}
}

// Relabel changes the label of the spinner showing; it does nothing when
// none is, as what it reports on is over.
func (t *Terminal) Relabel(label string) {
	s := t.lock()
	defer t.mu.Unlock()
	if s.spin.label == "" {
		return
	}
	s.spin.erase(s.status)
	s.spin.label = label
	s.spin.draw(s.status, s.paint)
}

// Idle takes the spinner away.
func (t *Terminal) Idle() {
	s := t.lock()
	defer t.mu.Unlock()
	s.spin.stop(s.status)
}

// tick draws the next frame until done is closed.
func (t *Terminal) tick(done chan struct{}) {
	tk := time.NewTicker(spinnerTick)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			s := t.lock()
			s.spin.erase(s.status)
			s.spin.draw(s.status, s.paint)
			t.mu.Unlock()
		}
	}
}

// draw draws the next frame when the spinner is on.
func (s *spinner) draw(w io.Writer, paint func(style, s string) string) {
	if s.label == "" || w == nil {
		return
	}
	io.WriteString(w, paint(styleCyan, spinnerFrames[s.frame])+" "+paint(styleDim, s.label))
	s.frame = (s.frame + 1) % len(spinnerFrames)
	s.shown = true
}

// erase takes the frame off the screen; the spinner stays on.
func (s *spinner) erase(w io.Writer) {
	if s.shown {
		io.WriteString(w, eraseLine)
		s.shown = false
	}
}

// stop erases the spinner and turns it off.
func (s *spinner) stop(w io.Writer) {
	s.erase(w)
	s.label = ""
	if s.ticking != nil {
		close(s.ticking)
		s.ticking = nil
	}
}
