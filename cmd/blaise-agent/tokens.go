package main

import (
	"context"
	"os"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server"
)

// TokensCmd is `blaise-agent tokens`: the server admin's credentials.
type TokensCmd struct {
	Registration TokensRegistrationCmd `cmd:"" help:"Mint a registration token: one runner exchanges it, once, for its credential."`
	API          TokensAPICmd          `cmd:"" name:"api" help:"Mint an API token for a client (an editor, the CLI)."`
	List         TokensListCmd         `cmd:"" help:"List runners and API tokens."`
	Revoke       TokensRevokeCmd       `cmd:"" help:"Revoke a runner's credential or an API token."`
}

type TokensRegistrationCmd struct {
	StoreFlags
	TTL time.Duration `name:"ttl" help:"How long the token may be used." default:"1h"`
}

func (c *TokensRegistrationCmd) Run() error {
	return server.MintRegistration(context.Background(), c.options(), c.TTL, os.Stdout, os.Stderr)
}

type TokensAPICmd struct {
	StoreFlags
	Name string `arg:"" help:"Whose token it is (a person, an editor)."`
}

func (c *TokensAPICmd) Run() error {
	return server.MintAPIToken(context.Background(), c.options(), c.Name, os.Stdout, os.Stderr)
}

type TokensListCmd struct {
	StoreFlags
	JSON bool `name:"json" help:"Print the runners and API tokens as a JSON array, for scripts."`
}

func (c *TokensListCmd) Run() error {
	return server.ListCredentials(context.Background(), c.options(), os.Stdout, c.JSON)
}

type TokensRevokeCmd struct {
	StoreFlags
	ID string `arg:"" help:"The id of the runner or the token (see tokens list)."`
}

func (c *TokensRevokeCmd) Run() error {
	return server.Revoke(context.Background(), c.options(), c.ID, os.Stdout)
}
