package main

import (
	"context"
	"io"
	"os"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/lsp"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
)

// LspCmd is `blaise-agent lsp`: a language server for .star files.
type LspCmd struct{}

// Run serves LSP on stdin and stdout until the editor exits.
func (c *LspCmd) Run(g *Globals) error {
	// print() of files being checked is the editor's business, not a log line.
	quiet := log.New(io.Discard)
	newLoader := func() *interp.Loader { return chain.NewLoader(quiet) }
	return lsp.Serve(context.Background(), os.Stdin, os.Stdout, newLoader, buildinfo.Version())
}
