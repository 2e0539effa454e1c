package sqlstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Token prefixes: a leaked token is recognisable (and greppable) by what
// it is.
const (
	RegistrationPrefix = "blr_" // registers one runner, once
	RunnerPrefix       = "blc_" // a runner's credential
	APIPrefix          = "bla_" // a client's API token
)

// ErrBadToken is wrapped in the error for a token that is unknown,
// expired, already used or revoked.
var ErrBadToken = errors.New("invalid token")

// newToken returns a fresh token with prefix: 256 random bits, base64url.
func newToken(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// hashToken is what the store keeps of a token. The tokens are 256-bit
// random strings, not passwords: no one can guess one, so a fast hash
// suffices (a slow one like argon2 guards against guessing, and would
// only slow every request). Tokens are looked up by their hash in SQL, so
// no comparison of secrets happens in Go, and the time a lookup takes
// tells nothing of a secret no one knows the hash preimage of.
func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// checkToken refuses a string that is not a token of the kind prefix
// names, before it reaches the database.
func checkToken(what, prefix, tok string) error {
	if !strings.HasPrefix(tok, prefix) || len(tok) != len(prefix)+43 {
		for other, kind := range tokenKinds {
			if other != prefix && strings.HasPrefix(tok, other) {
				return fmt.Errorf("%s: %w: this is %s (%s…); want %s followed by 43 characters", what, ErrBadToken, kind, other, prefix)
			}
		}
		return fmt.Errorf("%s: %w: want %s followed by 43 characters", what, ErrBadToken, prefix)
	}
	return nil
}

// tokenKinds name the tokens by their prefixes, for a token given where
// another kind is wanted.
var tokenKinds = map[string]string{
	RegistrationPrefix: "a runner registration token",
	RunnerPrefix:       "a runner's credential",
	APIPrefix:          "an API token",
	SetupPrefix:        "the dashboard's setup token",
}

// Registration is a registration token. Token is set only when it is
// minted: it is shown once, then, and never stored.
type Registration struct {
	ID       string
	Token    string
	Created  time.Time
	Expires  time.Time
	Used     time.Time // zero until a runner registers with it
	RunnerID string    // the runner that did
}

// MintRegistration mints a registration token that one runner may
// exchange, once, for its credential before ttl has passed.
func (s *tokenStore) MintRegistration(ctx context.Context, ttl time.Duration) (*Registration, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("registration token: want a positive lifetime, got %s", ttl)
	}
	now := s.now()
	r := &Registration{ID: lifecycle.NewID(), Token: newToken(RegistrationPrefix), Created: now, Expires: now.Add(ttl)}
	if _, err := s.writer().exec(ctx, "INSERT INTO registration_tokens (id, hash, created, expires) VALUES (?, ?, ?, ?)",
		r.ID, hashToken(r.Token), now.UnixNano(), r.Expires.UnixNano()); err != nil {
		return nil, fmt.Errorf("registration token: %s: %w", s.where, err)
	}
	return r, nil
}

// Registrations returns every registration token, used and expired ones
// included, oldest first.
func (s *tokenStore) Registrations(ctx context.Context) ([]*Registration, error) {
	return list(ctx, s.handles, "registration tokens", "SELECT id, created, expires, used, runner_id FROM registration_tokens ORDER BY created, id",
		func(row interface{ Scan(...any) error }) (*Registration, error) {
			var r Registration
			var created, expires, used int64
			if err := row.Scan(&r.ID, &created, &expires, &used, &r.RunnerID); err != nil {
				return nil, err
			}
			r.Created, r.Expires, r.Used = fromNanos(created), fromNanos(expires), fromNanos(used)
			return &r, nil
		})
}

// RevokeRegistration makes an unused registration token expire now: no
// runner can register with it any more. One already used or expired is
// no error. An unknown id is an error wrapping ErrNotFound.
func (s *tokenStore) RevokeRegistration(ctx context.Context, id string) error {
	now := s.now().UnixNano()
	n, err := affected(s.writer().exec(ctx,
		"UPDATE registration_tokens SET expires = CASE WHEN used = 0 AND expires > ? THEN ? ELSE expires END WHERE id = ?", now, now, id))
	if err != nil {
		return fmt.Errorf("registration token %s: %s: %w", id, s.where, err)
	}
	if n == 0 {
		return fmt.Errorf("registration token %s: %w", id, ErrNotFound)
	}
	return nil
}

// Runner is a registered runner.
type Runner struct {
	ID       string
	Name     string
	Created  time.Time
	LastSeen time.Time
	Revoked  time.Time // zero while the credential is valid
}

// RunnerByCredential returns the runner a credential belongs to, and
// records that it was seen now. A revoked or unknown credential is an
// error wrapping ErrBadToken.
func (s *tokenStore) RunnerByCredential(ctx context.Context, cred string) (*Runner, error) {
	return runners.use(ctx, s, cred)
}

// Runners returns every registered runner, revoked ones included, by name
// then id.
func (s *tokenStore) Runners(ctx context.Context) ([]*Runner, error) {
	return runners.list(ctx, s)
}

// RevokeRunner revokes a runner's credential; revoking it again is no
// error. An unknown id is an error wrapping ErrNotFound.
func (s *tokenStore) RevokeRunner(ctx context.Context, id string) error {
	return runners.revoke(ctx, s, id)
}

// Register exchanges a registration token, once, for a runner credential
// of a new runner named name. The credential is returned in clear only
// here; the store keeps its hash.
func (s *tokenStore) Register(ctx context.Context, regToken, name string) (cred, runnerID string, err error) {
	if err := lifecycle.CheckName("runner", name); err != nil {
		return "", "", err
	}
	if err := checkToken("registration token", RegistrationPrefix, regToken); err != nil {
		return "", "", err
	}
	now := s.now()
	cred, runnerID = newToken(RunnerPrefix), lifecycle.NewID()
	err = s.inTx(ctx, func(c conn) error {
		var id, usedBy string
		var expires, used int64
		err := c.row(ctx, "SELECT id, expires, used, runner_id FROM registration_tokens WHERE hash = ?"+s.d.forUpdate, hashToken(regToken)).Scan(&id, &expires, &used, &usedBy)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("registration token: %w: no such token (mint one with the server's admin command)", ErrBadToken)
		}
		if err != nil {
			return fmt.Errorf("registration token: %s: %w", s.where, err)
		}
		if used != 0 {
			return fmt.Errorf("registration token %s: %w: already used, at %s, by runner %s; mint another", id, ErrBadToken, fromNanos(used).Format(time.RFC3339), usedBy)
		}
		if !now.Before(fromNanos(expires)) {
			return fmt.Errorf("registration token %s: %w: expired at %s; mint another", id, ErrBadToken, fromNanos(expires).Format(time.RFC3339))
		}
		// The used = 0 guard makes the exchange happen once even where
		// FOR UPDATE is not needed (SQLite's single writer).
		n, err := affected(c.exec(ctx, "UPDATE registration_tokens SET used = ?, runner_id = ? WHERE id = ? AND used = 0", now.UnixNano(), runnerID, id))
		if err != nil {
			return fmt.Errorf("registration token %s: %s: %w", id, s.where, err)
		}
		if n != 1 {
			return fmt.Errorf("registration token %s: %w: already used", id, ErrBadToken)
		}
		if _, err := c.exec(ctx, "INSERT INTO runners (id, name, cred_hash, created, last_seen) VALUES (?, ?, ?, ?, ?)",
			runnerID, name, hashToken(cred), now.UnixNano(), now.UnixNano()); err != nil {
			return fmt.Errorf("runner %s: %s: %w", name, s.where, err)
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	return cred, runnerID, nil
}

// RunnerSeen records that the runner of id was seen now: a runner whose
// connection ended was last seen then, not when it connected.
func (s *tokenStore) RunnerSeen(ctx context.Context, id string) error {
	if _, err := s.writer().exec(ctx, "UPDATE runners SET last_seen = ? WHERE id = ?", s.now().UnixNano(), id); err != nil {
		return fmt.Errorf("runner %s: %s: %w", id, s.where, err)
	}
	return nil
}

// APIToken is a client's API token, as stored (without the token).
type APIToken struct {
	ID       string
	Name     string
	Created  time.Time
	LastUsed time.Time
	Revoked  time.Time // zero while the token is valid
}

// MintAPIToken mints an API token for a client named name; the token is
// returned in clear only here.
func (s *tokenStore) MintAPIToken(ctx context.Context, name string) (tok, id string, err error) {
	if strings.TrimSpace(name) == "" {
		return "", "", errors.New("API token: want a name that says whose it is")
	}
	tok, id = newToken(APIPrefix), lifecycle.NewID()
	if _, err := s.writer().exec(ctx, "INSERT INTO api_tokens (id, name, hash, created) VALUES (?, ?, ?, ?)",
		id, name, hashToken(tok), s.now().UnixNano()); err != nil {
		return "", "", fmt.Errorf("API token %q: %s: %w", name, s.where, err)
	}
	return tok, id, nil
}

// APIToken returns the API token tok is, recording its use. A revoked or
// unknown token is an error wrapping ErrBadToken.
func (s *tokenStore) APIToken(ctx context.Context, tok string) (*APIToken, error) {
	return apiTokens.use(ctx, s, tok)
}

// APITokens returns every API token, revoked ones included, by name then
// id.
func (s *tokenStore) APITokens(ctx context.Context) ([]*APIToken, error) {
	return apiTokens.list(ctx, s)
}

// RevokeAPIToken revokes an API token; revoking it again is no error. An
// unknown id is an error wrapping ErrNotFound.
func (s *tokenStore) RevokeAPIToken(ctx context.Context, id string) error {
	return apiTokens.revoke(ctx, s, id)
}

// credentials are a kind of named, revocable token kept by its hash, whose
// lookup records its use: runners' credentials and API tokens, each a T.
type credentials[T any] struct {
	what   string // one, in errors
	token  string // its token, in errors
	plural string // in errors of a listing
	prefix string
	// table, and its columns of the hash and of the last use.
	table, hash, used string
	// unknown says what to do with an unknown or revoked token.
	unknown string
	// of makes a T of a row's id, name and times.
	of func(id, name string, created, used, revoked time.Time) *T
}

var (
	runners = credentials[Runner]{
		what: "runner", token: "runner credential", plural: "runners", prefix: RunnerPrefix,
		table: "runners", hash: "cred_hash", used: "last_seen",
		unknown: "unknown or revoked; register the runner again",
		of: func(id, name string, created, seen, revoked time.Time) *Runner {
			return &Runner{ID: id, Name: name, Created: created, LastSeen: seen, Revoked: revoked}
		},
	}
	apiTokens = credentials[APIToken]{
		what: "API token", token: "API token", plural: "API tokens", prefix: APIPrefix,
		table: "api_tokens", hash: "hash", used: "last_used",
		unknown: "unknown or revoked",
		of: func(id, name string, created, used, revoked time.Time) *APIToken {
			return &APIToken{ID: id, Name: name, Created: created, LastUsed: used, Revoked: revoked}
		},
	}
)

func (k credentials[T]) columns() string { return "id, name, created, " + k.used + ", revoked" }

func (k credentials[T]) scan(row interface{ Scan(...any) error }) (*T, error) {
	var id, name string
	var created, used, revoked int64
	if err := row.Scan(&id, &name, &created, &used, &revoked); err != nil {
		return nil, err
	}
	return k.of(id, name, fromNanos(created), fromNanos(used), fromNanos(revoked)), nil
}

// use returns what tok is, recording that it was used now.
func (k credentials[T]) use(ctx context.Context, s *tokenStore, tok string) (*T, error) {
	if err := checkToken(k.token, k.prefix, tok); err != nil {
		return nil, err
	}
	v, err := k.scan(s.writer().row(ctx,
		"UPDATE "+k.table+" SET "+k.used+" = ? WHERE "+k.hash+" = ? AND revoked = 0 RETURNING "+k.columns(), s.now().UnixNano(), hashToken(tok)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w: %s", k.token, ErrBadToken, k.unknown)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", k.token, s.where, err)
	}
	return v, nil
}

// list returns every row, revoked ones included, by name then id.
func (k credentials[T]) list(ctx context.Context, s *tokenStore) ([]*T, error) {
	return list(ctx, s.handles, k.plural, "SELECT "+k.columns()+" FROM "+k.table+" ORDER BY name, id", k.scan)
}

// revoke marks the row id revoked, keeping the first revocation's time.
func (k credentials[T]) revoke(ctx context.Context, s *tokenStore, id string) error {
	n, err := affected(s.writer().exec(ctx,
		"UPDATE "+k.table+" SET revoked = CASE WHEN revoked = 0 THEN ? ELSE revoked END WHERE id = ?", s.now().UnixNano(), id))
	if err != nil {
		return fmt.Errorf("%s %s: %s: %w", k.what, id, s.where, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", k.what, id, ErrNotFound)
	}
	return nil
}

// list runs a query whose rows scan reads.
func list[T any](ctx context.Context, s *handles, what, query string, scan func(interface{ Scan(...any) error }) (*T, error)) ([]*T, error) {
	rows, err := s.read.rows(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: listing %s: %w", s.where, what, err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: listing %s: %w", s.where, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: listing %s: %w", s.where, what, err)
	}
	return out, nil
}
