package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/chzyer/readline"
)

// ErrInterrupted is returned by [Input.ReadLine] when the person typed
// Ctrl-C at the prompt.
var ErrInterrupted = errors.New("interrupted")

// An Input reads the person's lines, prompts and answers alike, one
// reader at a time.
type Input interface {
	// ReadLine shows prompt and returns the next line without its end:
	// io.EOF at the end of input, ErrInterrupted for Ctrl-C. When ctx
	// ends first it returns ctx's error, and the line being typed is
	// returned by the next call.
	ReadLine(ctx context.Context, prompt string) (string, error)
	// Wrap returns a writer to w (the same terminal as the prompt) that
	// keeps a prompt being answered below what it writes, redrawn.
	Wrap(w io.Writer) io.Writer
	// Remember adds a line to the history, kept across runs.
	Remember(line string)
	Close() error
}

// NewInput returns an Input reading in. When in and out are terminals
// (and TERM is not dumb) lines are edited (arrows, Ctrl-A/E/W/U, Ctrl-R)
// with their history kept in the file history ("" keeps none); else
// lines are read as they come and prompts written to out. The editor
// reads Ctrl-C as a key: typed while no ReadLine waits (the question it
// was typed at was withdrawn), it calls interrupt, as the signal a
// terminal would have sent.
func NewInput(in, out *os.File, history string, interrupt func()) (Input, error) {
	if !Capable(in) || !Capable(out) {
		return newPlainInput(in, out), nil
	}
	stdin := readline.NewCancelableStdin(altEnter{in})
	rl, err := readline.NewEx(&readline.Config{
		Stdin:                  stdin,
		Stdout:                 out,
		Stderr:                 out,
		HistoryFile:            history,
		HistoryLimit:           1000,
		DisableAutoSaveHistory: true, // answers to questions are no history
		InterruptPrompt:        "^C",
	})
	if err != nil {
		return nil, err
	}
	return &editor{rl: rl, stdin: stdin, res: make(chan lineResult, 1), interrupt: interrupt}, nil
}

type lineResult struct {
	line string
	err  error
}

// editor is the Input of a terminal.
type editor struct {
	rl      *readline.Instance
	stdin   io.Closer // closed first: rl.Close waits for its reads to end
	mu      sync.Mutex
	reading bool            // a Readline is under way
	waiting bool            // a ReadLine waits for it
	res     chan lineResult // its line

	interrupt func()
}

func (e *editor) ReadLine(ctx context.Context, prompt string) (string, error) {
	e.mu.Lock()
	e.rl.SetPrompt(prompt)
	e.waiting = true
	if e.reading {
		e.rl.Refresh() // a line begun for an earlier question goes on here
	} else {
		e.reading = true
		// One reader of the line editor at a time; ends with its next line or at exit.
		go e.read()
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.waiting = false
		e.mu.Unlock()
	}()
	select {
	case r := <-e.res:
		if errors.Is(r.err, readline.ErrInterrupt) {
			return "", ErrInterrupted
		}
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// read reads a line for ReadLine.
func (e *editor) read() {
	line, err := e.rl.Readline()
	e.mu.Lock()
	e.reading = false
	if errors.Is(err, readline.ErrInterrupt) && !e.waiting && e.interrupt != nil {
		e.mu.Unlock()
		e.interrupt()
		return
	}
	e.mu.Unlock()
	e.res <- lineResult{line, err}
}

func (e *editor) Wrap(w io.Writer) io.Writer { return &aboveWriter{e: e, w: w} }

func (e *editor) Remember(line string) { _ = e.rl.SaveHistory(line) }

func (e *editor) Close() error {
	e.stdin.Close()
	return e.rl.Close()
}

// altEnter reads keys, Alt-Enter (Escape, Return) turned into a backslash
// and Return: a line that goes on on the next one. (The editor reads
// Alt-Enter as Return.)
type altEnter struct{ r io.Reader }

func (a altEnter) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	for i := 0; i+1 < n; i++ {
		if p[i] == '\x1b' && p[i+1] == '\r' {
			p[i] = '\\'
		}
	}
	return n, err
}

// aboveWriter writes above the prompt being answered.
type aboveWriter struct {
	e *editor
	w io.Writer
}

func (a *aboveWriter) Write(b []byte) (int, error) {
	if !a.e.rl.Terminal.IsReading() {
		return a.w.Write(b)
	}
	a.e.rl.Clean()
	defer a.e.rl.Refresh()
	return a.w.Write(b)
}

// plainInput reads lines from a pipe or a file.
type plainInput struct {
	out   io.Writer
	lines <-chan string
	mu    sync.Mutex
	shown string // the prompt waiting for its line; "" when none
}

func newPlainInput(in io.Reader, out io.Writer) *plainInput {
	lines := make(chan string)
	// Reads until in ends (the terminal's stdin: at exit).
	go func() {
		defer close(lines)
		br := bufio.NewReader(in)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return &plainInput{out: out, lines: lines}
}

func (p *plainInput) ReadLine(ctx context.Context, prompt string) (string, error) {
	p.mu.Lock()
	io.WriteString(p.out, prompt)
	p.shown = prompt
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.shown = ""
		p.mu.Unlock()
	}()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", io.EOF
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Wrap returns a writer that starts a line of its own below a prompt
// shown, and shows the prompt again after it.
func (p *plainInput) Wrap(w io.Writer) io.Writer { return &plainAbove{p: p, w: w} }

func (p *plainInput) Remember(string) {}

func (p *plainInput) Close() error { return nil }

type plainAbove struct {
	p *plainInput
	w io.Writer
}

func (a *plainAbove) Write(b []byte) (int, error) {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if a.p.shown == "" {
		return a.w.Write(b)
	}
	io.WriteString(a.p.out, "\n")
	n, err := a.w.Write(b)
	io.WriteString(a.p.out, a.p.shown)
	return n, err
}
