package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// The admin's commands work on the server's store directly: who may run
// them is who may read the data directory (or the database).

// MintRegistration mints a registration token and prints it, once: the
// token alone on w, for $(…), and how to use it on note.
func MintRegistration(ctx context.Context, o StoreOptions, ttl time.Duration, w, note io.Writer) error {
	return withNewStore(ctx, o, note, func(s *sqlstore.Store) error {
		r, err := s.MintRegistration(ctx, ttl)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", r.Token)
		fmt.Fprintf(note, "# registers one runner, once, until %s; it is not shown again:\n#   blaise-agent listen --register-token %s …\n", r.Expires.Local().Format(time.DateTime), r.Token)
		return nil
	})
}

// MintAPIToken mints an API token for a client named name and prints it,
// once: the token alone on w, for $(…), and what it is on note.
func MintAPIToken(ctx context.Context, o StoreOptions, name string, w, note io.Writer) error {
	return withNewStore(ctx, o, note, func(s *sqlstore.Store) error {
		tok, id, err := s.MintAPIToken(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", tok)
		fmt.Fprintf(note, "# API token %s for %s; it is not shown again: export BLAISE_TOKEN=%s\n", id, name, tok)
		return nil
	})
}

// Credential is a runner's credential or an API token, as tokens list
// --json prints it: never the secret, which the store keeps hashed.
type Credential struct {
	Kind    string    `json:"kind"` // runner or api
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// ListCredentials prints the runners and the API tokens: a table, or with
// asJSON a JSON array of Credential.
func ListCredentials(ctx context.Context, o StoreOptions, w io.Writer, asJSON bool) error {
	return withStore(ctx, o, func(s *sqlstore.Store) error {
		runners, err := s.Runners(ctx)
		if err != nil {
			return err
		}
		tokens, err := s.APITokens(ctx)
		if err != nil {
			return err
		}
		creds := []Credential{}
		for _, r := range runners {
			creds = append(creds, Credential{Kind: "runner", ID: r.ID, Name: r.Name, Created: r.Created, Revoked: r.Revoked})
		}
		for _, t := range tokens {
			creds = append(creds, Credential{Kind: "api", ID: t.ID, Name: t.Name, Created: t.Created, Revoked: t.Revoked})
		}
		if asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(creds)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tID\tNAME\tCREATED\tREVOKED")
		for _, c := range creds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Kind, c.ID, c.Name, day(c.Created), day(c.Revoked))
		}
		return tw.Flush()
	})
}

func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// Revoke revokes a runner's credential or an API token, by id.
func Revoke(ctx context.Context, o StoreOptions, id string, w io.Writer) error {
	return withStore(ctx, o, func(s *sqlstore.Store) error {
		err := s.RevokeRunner(ctx, id)
		if errors.Is(err, sqlstore.ErrNotFound) {
			err = s.RevokeAPIToken(ctx, id)
		}
		if errors.Is(err, sqlstore.ErrNotFound) {
			return fmt.Errorf("no runner and no API token has id %s (see `blaise-agent tokens list`)", id)
		}
		if err == nil {
			fmt.Fprintf(w, "revoked %s\n", id)
		}
		return err
	})
}

// withStore runs f on the store serve made; there being none is an error.
func withStore(ctx context.Context, o StoreOptions, f func(*sqlstore.Store) error) error {
	s, err := o.OpenExisting(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

// withNewStore runs f on the server's store, made where there is none (a
// token minted before the server's first start), which note says: a
// --data other than serve's would otherwise mint a token that the server
// does not know, without a word.
func withNewStore(ctx context.Context, o StoreOptions, note io.Writer, f func(*sqlstore.Store) error) error {
	if err := o.missing(); err != nil {
		fmt.Fprintf(note, "note: %v; made a new one there, which serve uses only when given the same --data (or --db)\n", err)
	}
	s, err := o.Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}
