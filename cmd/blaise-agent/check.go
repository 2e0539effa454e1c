package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
	"github.com/blaiseagent/blaise-agent/interp"
)

// CheckCmd is `blaise-agent check`.
type CheckCmd struct {
	ConfigFlag
	JSON bool `name:"json" help:"Print the problems found and the chain as JSON, for scripts and CI."`
}

// checked is what check --json prints.
type checked struct {
	Config   string        `json:"config"` // its absolute path
	OK       bool          `json:"ok"`
	Problems []checkIssue  `json:"problems"`
	Chain    *checkedChain `json:"chain,omitempty"`
}

// A checkIssue is an error or a warning, where it is.
type checkIssue struct {
	Severity string `json:"severity"` // error or warning
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Col      int    `json:"col,omitempty"`
	Message  string `json:"message"`
}

type checkedChain struct {
	Agent     []string      `json:"agent"`
	Plugs     []checkedPlug `json:"plugs"`
	Resumable bool          `json:"resumable"`
}

type checkedPlug struct {
	Name      string   `json:"name"`
	ID        string   `json:"id,omitempty"`
	Ref       string   `json:"ref"`
	Resumable bool     `json:"resumable"`
	Handlers  []string `json:"handlers"`
	Commit    string   `json:"commit,omitempty"` // of a plug pinned in blaise.lock
}

// Run loads the configuration, with the mistakes of the handlers' code
// that a run would meet only on the paths that have them, and prints its
// chain.
func (c *CheckCmd) Run(g *Globals) error {
	l := chain.NewLoader(g.Logger())
	l.Vet = true
	cfg, err := l.LoadConfig(c.Config)
	if c.JSON {
		out := checked{Config: c.Config, OK: err == nil, Problems: issues(err)}
		for _, w := range l.Warnings() {
			out.Problems = append(out.Problems, issueOf(w, "warning"))
		}
		if cfg != nil && err == nil {
			out.Chain = chainOf(cfg)
		}
		if perr := printJSON(out); perr != nil {
			return perr
		}
		return err
	}
	// Every mistake in one pass: the warnings too, when errors stop the
	// configuration.
	defer func() {
		for _, w := range l.Warnings() {
			fmt.Fprintf(os.Stderr, "warning: %s\n", w)
		}
	}()
	if err != nil {
		return err
	}
	ch := chainOf(cfg)
	out := os.Stdout
	fmt.Fprintf(out, "%s: agent %s\n", cfg.File, strings.Join(ch.Agent, " "))
	for i, p := range ch.Plugs {
		resumable := "resumable"
		if !p.Resumable {
			resumable = "not resumable"
		}
		fmt.Fprintf(out, "  %d. %-24s id=%-10s %s (%s; %s)\n", i+1, p.Name, cmp.Or(p.ID, "-"), p.Ref, resumable, strings.Join(p.Handlers, ", "))
		if p.Commit != "" {
			fmt.Fprintf(out, "     pinned to commit %s\n", p.Commit)
		}
	}
	if ch.Resumable {
		fmt.Fprintln(out, "the chain can resume")
	} else {
		fmt.Fprintln(out, "the chain cannot resume")
	}
	return nil
}

// chainOf is the chain of a configuration that loaded.
func chainOf(cfg *interp.Config) *checkedChain {
	ch := &checkedChain{Agent: append([]string{cfg.Agent.Command}, cfg.Agent.Args...), Plugs: []checkedPlug{}, Resumable: cfg.Resumable()}
	for _, u := range cfg.Uses {
		p := checkedPlug{Name: u.Plug.Name, ID: u.ID, Ref: u.Ref, Resumable: u.Plug.Resumable, Handlers: u.Plug.Handlers()}
		if r, err := plugref.Parse(u.Key); err == nil {
			p.Commit = r.Rev
		}
		ch.Plugs = append(ch.Plugs, p)
	}
	return ch
}

// issues lists the errors in err (one, or interp.Errors), each at its
// place when it has one.
func issues(err error) []checkIssue {
	if err == nil {
		return []checkIssue{}
	}
	list := interp.ErrorsIn(err)
	if list == nil {
		return []checkIssue{{Severity: "error", Message: err.Error()}}
	}
	out := make([]checkIssue, len(list))
	for i, e := range list {
		out[i] = issueOf(e, "error")
	}
	return out
}

func issueOf(e *interp.Error, severity string) checkIssue {
	if !e.Pos.IsValid() {
		return checkIssue{Severity: severity, Message: e.Error()}
	}
	return checkIssue{Severity: severity, File: e.Pos.Filename(), Line: int(e.Pos.Line), Col: int(e.Pos.Col),
		Message: strings.TrimPrefix(e.Error(), e.Pos.String()+": ")}
}
